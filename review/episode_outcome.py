"""What the episode page says of how an episode went: how it ended and at which step (taskgen/endings.py), the time
it took against the limits that applied, and the task's verifier (its result, or why it was not run).

Plain data for templates, which escape it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.seed import SITES
from taskgen.models import Episode, Run
from taskgen.providers import provider_names


def in_sandbox(episode: Episode) -> bool:
    """Whether the episode was recorded here on a sandbox site (not imported from the live web)."""
    return episode.site.slug in SITES and episode.run.origin == Run.Origin.ATTEMPT


def _seconds(value) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "?"
    return f"{value:.0f} s" if float(value).is_integer() else f"{value:.1f} s"


def time_lines(episode: Episode) -> list[str]:
    """The episode's browser time against its limit and, for a model agent, the model's own time deciding against
    its limit: the two limits are apart (a slow model does not time the browser out)."""
    extra = episode.extra if isinstance(episode.extra, dict) else {}
    spent = extra.get("time")
    if not isinstance(spent, dict):
        return []
    lines = [f"Browser time {_seconds(spent.get('episode_seconds'))} of the episode's limit of "
             f"{_seconds(spent.get('episode_limit'))} (TASKGEN_HARNESS_EPISODE_SECONDS; the agent's own time is not "
             "counted in it)"]
    run = extra.get("agent_run")
    if isinstance(run, dict) and run.get("provider") in provider_names("agent"):
        lines.append(f"The model's own time deciding {_seconds(spent.get('agent_seconds'))} of its limit of "
                     f"{_seconds(spent.get('agent_limit'))} (TASKGEN_AGENT_MODEL_SECONDS)")
    return lines


@dataclass
class VerifierView:
    """A task's verifier where it gave no result: its checks and why it was not run ("none": no verifier at all).
    A result, with the checks it passed and failed, is the VerifierResult's own (the page shows it)."""

    state: str  # "result" | "not run" | "none"
    source: str = ""
    parts: list[dict] = field(default_factory=list)  # the checks it would make: [{part}]
    why_not_run: str = ""


def _checks(task_verifier) -> list[dict]:
    checks = task_verifier.get("checks") if isinstance(task_verifier, dict) else None
    return [{"part": str(c.get("part") or c.get("type") or "a check")} for c in checks or [] if isinstance(c, dict)]


def verifier_view(episode: Episode) -> VerifierView:
    """For a task that has a verifier and no result, its checks and why it was not run."""
    if getattr(episode, "verifier_result", None) is not None:
        return VerifierView("result")
    checks = _checks(episode.task.verifier)
    if not checks:
        return VerifierView("none")
    if episode.ending.failed:
        why = f"the episode failed ({episode.ending.short}), so the verifier did not check its final state"
    elif in_sandbox(episode):
        why = "the attempt recorded no result for it"
    else:
        why = "the run dir has no result for this task (results.jsonl)"
    return VerifierView("not run", "sandbox verifier" if episode.site.slug in SITES else "", checks, why)
