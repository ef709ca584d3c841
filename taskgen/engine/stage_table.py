"""The stages the engine runs, by name. The engine imports no stage: each stage folder declares its StageWork in
`work.py` with `stage_register`, and the app tells the engine where each stage's work module is when Django starts
(taskgen/apps.py), so the arrow points down: stages -> engine. A stage's module is imported the first time the
engine asks for that stage: a process judging a run never imports the export's or the harness's code (30-60 ms of
every command's and worker's start).
"""
from __future__ import annotations

import importlib

from django.conf import settings

from taskgen.engine.contract import StageWork

ENGINE_STAGES: dict[str, StageWork] = {}  # the stages registered so far (imported, or registered by a test)
_STAGE_MODULES: dict[str, str] = {}  # name -> the module that registers it, imported on first use


class UnknownStage(LookupError):
    """No stage of that name runs on the engine."""


def stage_register(work: StageWork) -> StageWork:
    """Make a stage known to the engine under its name (a second registration of one name replaces the first)."""
    ENGINE_STAGES[work.name] = work
    return work


def stage_modules_register(modules: dict[str, str]) -> None:
    """Where each stage's work module is, by stage name (the composition root, at Django's start)."""
    _STAGE_MODULES.update(modules)


def stage_work(name: str) -> StageWork:
    """The StageWork of a stage, its module imported now if this is the first time; UnknownStage when the engine
    does not run it."""
    if name not in ENGINE_STAGES and name in _STAGE_MODULES:
        importlib.import_module(_STAGE_MODULES[name])
    try:
        return ENGINE_STAGES[name]
    except KeyError:
        raise UnknownStage(f"there is no {name!r} stage on the engine") from None


def stage_found(name: str) -> StageWork | None:
    """stage_work's answer, or None when the engine does not run that stage (a run of a stage since removed)."""
    try:
        return stage_work(name)
    except UnknownStage:
        return None


def stage_names() -> list[str]:
    """Every stage the engine runs, imported or not yet."""
    return sorted(set(ENGINE_STAGES) | set(_STAGE_MODULES))


def stages_all() -> dict[str, StageWork]:
    """Every stage's StageWork by name (each stage's module imported)."""
    return {name: stage_work(name) for name in stage_names()}


def workers_per_run(name: str) -> int:
    """Worker messages a run of this stage gets: the stage's own number (the judge's I/O-bound threads want more),
    else settings.ENGINE_WORKERS_PER_RUN."""
    work = stage_found(name)
    return (work.workers if work else 0) or settings.ENGINE_WORKERS_PER_RUN
