"""How an agent says it cannot go on: its own module, so the agents, the model agent and its action checks import
it without importing each other."""
from __future__ import annotations


class AgentError(RuntimeError):
    """The agent cannot attempt this task (for the scripted agent: the task has no known solution), or cannot go
    on (its model failed). `final`: another try would fail the same way (a model server's 400 for a context too
    long, a body that is not JSON), so the episode is not run again unasked."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


class AgentStop(Exception):  # noqa: N818 (a clean end of an episode, not an error)
    """The episode ends here, cleanly, for a reason the record keeps: `finished` says which kind (bad_element,
    off_site, unreadable), `reason` says it in words, `action` is what the agent said that could not be carried out
    (kept for review, never a training row)."""

    def __init__(self, finished: str, reason: str, action: dict | None = None) -> None:
        super().__init__(reason)
        self.finished = finished
        self.reason = reason
        self.action = action
