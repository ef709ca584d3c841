"""The stages the engine runs, by name. The engine imports no stage: each stage folder declares its StageWork in
`work.py` with `stage_register`, and the app registers every stage when Django starts (taskgen/apps.py), so the
arrow points down: stages -> engine.
"""
from __future__ import annotations

from django.conf import settings

from taskgen.engine.contract import StageWork

ENGINE_STAGES: dict[str, StageWork] = {}


class UnknownStage(LookupError):
    """No stage of that name runs on the engine."""


def stage_register(work: StageWork) -> StageWork:
    """Make a stage known to the engine under its name (a second registration of one name replaces the first)."""
    ENGINE_STAGES[work.name] = work
    return work


def stage_work(name: str) -> StageWork:
    """The StageWork of a stage; UnknownStage when the engine does not run it."""
    try:
        return ENGINE_STAGES[name]
    except KeyError:
        raise UnknownStage(f"there is no {name!r} stage on the engine") from None


def workers_per_run(name: str) -> int:
    """Worker messages a run of this stage gets: the stage's own number (the judge's I/O-bound threads want more),
    else settings.ENGINE_WORKERS_PER_RUN."""
    work = ENGINE_STAGES.get(name)
    return (work.workers if work else 0) or settings.ENGINE_WORKERS_PER_RUN
