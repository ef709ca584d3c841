"""How an episode ended, in one place: the kinds the harness records (`finished` in grade_inputs.json and
rows/episode.json, with `end_reason` and `end_step`), which of them make a failed episode, and how pages say them.

A kind not listed here (a run dir written by another harness) is shown as it was written.
"""
from __future__ import annotations

from dataclasses import dataclass

# kind -> (a short word for tables, what it means in a sentence)
ENDINGS: dict[str, tuple[str, str]] = {
    "done": ("done", "the agent said it was done"),
    "gave_up": ("gave up", "the agent gave up"),
    "step_limit": ("step limit", "the step limit was reached"),
    "bad_element": ("bad element", "the agent named an element the page does not have"),
    "off_site": ("left the site", "the agent tried to leave the task's site"),
    "unreadable": ("unreadable", "the model's answers could not be read"),
    "cannot_attempt": ("cannot attempt", "the agent cannot attempt this task"),
    "error": ("failed", "the episode failed in the harness"),
}
# Endings that make a failed episode (an outcome with its reason), not one that ran its course.
FAILED_ENDINGS = frozenset({"error", "cannot_attempt", "unreadable"})


@dataclass(frozen=True)
class Ending:
    """An episode's end as recorded: its kind, the step it ended at (0: before the first step) and why."""

    kind: str
    step: int | None
    reason: str

    @property
    def failed(self) -> bool:
        return self.kind in FAILED_ENDINGS

    @property
    def short(self) -> str:
        """For a table cell: `done at step 4`, `failed at step 1`, `cannot attempt`."""
        if not self.kind:
            return ""
        word = ENDINGS.get(self.kind, (self.kind, ""))[0]
        if self.step is None or self.kind == "cannot_attempt":
            return word
        return f"{word} at step {self.step}" if self.step else f"{word} before the first step"

    @property
    def sentence(self) -> str:
        """For the episode page: what ended it, at which step, and why."""
        if not self.kind:
            return ""
        meaning = ENDINGS.get(self.kind, ("", f"it ended as {self.kind!r}"))[1]
        where = "" if self.step is None else (f" at step {self.step}" if self.step else " before the first step")
        if self.kind == "step_limit" and self.reason:  # its reason says it whole: "the step limit (20) was reached"
            return f"Ended{where}: {self.reason}"
        return f"Ended{where}: {meaning}" + (f" — {self.reason}" if self.reason else "")


def ending_of(*, finished: str, end_reason: str = "", end_step: int | None = None) -> Ending:
    """The Ending of the values recorded (any may be missing from an imported run dir)."""
    return Ending(kind=str(finished or ""), step=end_step, reason=str(end_reason or ""))


def _step_of(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None


def ending_values(*, recorded: dict, summary: dict, actions: int) -> dict:
    """An episode's ending fields (finished, end_reason, end_step, status, failure_reason) from what its run dir
    holds: grade_inputs.json's keys (`recorded`) first, then rows/episode.json's (`summary`). Run dirs written before
    the harness kept the step say it by their actions for an ending by the agent or the step limit; one written
    when a failed episode's reason was lost (its end reason read "step limit") takes its harness error instead."""
    finished = recorded.get("finished") or summary.get("finished") or ""
    finished = finished[:40] if isinstance(finished, str) else ""
    reason = recorded.get("end_reason") or summary.get("end_reason") or ""
    reason = reason if isinstance(reason, str) else ""
    error = recorded.get("error") or summary.get("error") or ""
    if finished == "error" and isinstance(error, str) and error:
        reason = error
    step = _step_of(recorded.get("end_step", summary.get("end_step")))
    if step is None and finished and finished not in FAILED_ENDINGS:
        step = actions
    failed = finished in FAILED_ENDINGS
    return {"finished": finished, "end_reason": reason, "end_step": step,
            "status": "failed" if failed else "recorded", "failure_reason": reason if failed else ""}
