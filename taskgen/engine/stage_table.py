"""The stages the engine runs, by name: each stage folder declares its StageWork in `work.py`."""
from __future__ import annotations

from django.conf import settings

from taskgen.stages.attempt.work import ATTEMPT_WORK
from taskgen.stages.contract import StageWork
from taskgen.stages.export.work import EXPORT_WORK
from taskgen.stages.import_.work import IMPORT_WORK
from taskgen.stages.judge.work import JUDGE_WORK
from taskgen.stages.labels.work import LABELS_RESTORE_WORK
from taskgen.stages.propose.work import PROPOSE_WORK
from taskgen.stages.validate.work import VALIDATE_WORK

ENGINE_STAGES: dict[str, StageWork] = {
    work.name: work for work in (IMPORT_WORK, PROPOSE_WORK, ATTEMPT_WORK, JUDGE_WORK, VALIDATE_WORK, EXPORT_WORK,
                                 LABELS_RESTORE_WORK)}


class UnknownStage(LookupError):
    """No stage of that name runs on the engine."""


def stage_work(name: str) -> StageWork:
    """The StageWork of a stage; UnknownStage when the engine does not run it."""
    try:
        return ENGINE_STAGES[name]
    except KeyError:
        raise UnknownStage(f"there is no {name!r} stage on the engine") from None


def runs_on_engine(name: str) -> bool:
    return name in ENGINE_STAGES


def workers_per_run(name: str) -> int:
    """Worker messages a run of this stage gets: the stage's own number (the judge's I/O-bound threads want more),
    else settings.ENGINE_WORKERS_PER_RUN."""
    work = ENGINE_STAGES.get(name)
    return (work.workers if work else 0) or settings.ENGINE_WORKERS_PER_RUN
