"""Every stage an admin can start from the app, behind one call: `stage_start(stage=..., params=..., user=...)`.

Every stage runs on the engine (taskgen/engine/stage_table.py) and starts, cancels and resumes through
taskgen/engine/control.py.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import BinaryIO

from django.db import transaction

from taskgen.engine.control import ResumeError, run_cancel, run_resume, run_start
from taskgen.models import PipelineRun
from taskgen.stages.labels.work import labels_restore_file_store
from taskgen.stages.paths import existing_dir_under_data_root, existing_file_under_data_root
from taskgen.stages.propose.tasks_file import reviewed_tasks_file_write

log = logging.getLogger(__name__)
Stage = PipelineRun.Stage
__all__ = ["ResumeError", "StageUnavailable", "labels_restore_begin", "pipeline_run_cancel", "pipeline_run_resume",
           "stage_start"]


class StageUnavailable(RuntimeError):
    """There is no such stage to start."""


# ── starts: params are JSON-able form values; each returns the PipelineRun that tracks the work ─────────────────

def _engine_start(stage: str, params: dict, user, **checked: object) -> PipelineRun:
    """Start a stage on the engine: its parameters are checked by the stage (StageParamsError), and the form values
    are kept with the run (`started_with`) to show how it was started."""
    return run_start(stage=stage, params={**params, **checked}, user=user, started_with=params)


def import_begin(*, params: dict, user) -> PipelineRun:
    """Import a run dir under the data root (and its tasks file, when given)."""
    run_dir = existing_dir_under_data_root(raw=params["run_dir"])
    tasks = params.get("tasks_file") or ""
    tasks_file = str(existing_file_under_data_root(raw=tasks)) if tasks else ""
    return _engine_start(Stage.IMPORT, params, user, run_dir=str(run_dir), tasks_file=tasks_file)


def attempt_begin(*, params: dict, user) -> PipelineRun:
    """An attempt from the page: its tasks file must be under the data root."""
    tasks_file = existing_file_under_data_root(raw=params["tasks_file"])
    return _engine_start(Stage.ATTEMPT, params, user, tasks_file=str(tasks_file))


def approved_attempt_begin(*, params: dict, user) -> PipelineRun:
    """An attempt of the reviewed tasks of some sites: they are written as a tasks file under the data root first,
    so the attempt's parameters stay a tasks file (and the run can be repeated from it)."""
    tasks_file = reviewed_tasks_file_write(sites=params["sites"], include_all=bool(params.get("include_all")),
                                           name=params.get("name") or "approved")
    keep = {k: v for k, v in params.items() if k not in ("sites", "include_all")}
    try:
        return attempt_begin(params={**keep, "tasks_file": str(tasks_file)}, user=user)
    except Exception:
        tasks_file.unlink(missing_ok=True)  # a refused attempt leaves no tasks file behind in approved/
        raise


def judge_begin(*, params: dict, user) -> PipelineRun:
    return _engine_start(Stage.JUDGE, params, user)


def propose_begin(*, params: dict, user) -> PipelineRun:
    return _engine_start(Stage.PROPOSE, params, user)


def validate_begin(*, params: dict, user) -> PipelineRun:
    return _engine_start(Stage.VALIDATE, params, user)


def export_begin(*, params: dict, user) -> PipelineRun:
    return _engine_start(Stage.EXPORT, params, user)


def labels_restore_begin(*, source: BinaryIO, name: str, all_or_nothing: bool, user) -> PipelineRun:
    """Restore a labels backup: the file is stored (nothing else is done in the caller's request) and the restore
    runs on the engine, checking every line before it writes any."""
    sha, lines = labels_restore_file_store(source=source)
    params = {"file_sha256": sha, "name": name, "lines": lines, "all_or_nothing": all_or_nothing}
    return _engine_start(Stage.LABELS, params, user)


STARTS: dict[str, Callable[..., PipelineRun]] = {
    Stage.IMPORT: import_begin, Stage.PROPOSE: propose_begin, Stage.ATTEMPT: attempt_begin, Stage.JUDGE: judge_begin,
    "attempt-approved": approved_attempt_begin,
    Stage.VALIDATE: validate_begin, Stage.EXPORT: export_begin,
}


def stage_start(*, stage: str, params: dict, user) -> PipelineRun:
    """Start a stage; the form values are kept on the PipelineRun (`started_with`) to show how it was started."""
    if stage not in STARTS:
        raise StageUnavailable(f"there is no {stage!r} stage to start")
    with transaction.atomic():
        pipeline_run = STARTS[stage](params=params, user=user)
        if "started_with" not in (pipeline_run.params or {}):
            pipeline_run.params = {**(pipeline_run.params or {}), "started_with": params}
            pipeline_run.save(update_fields=["params"])
    return pipeline_run


# ── cancel and resume ───────────────────────────────────────────────────────────────────────────────────────────

def pipeline_run_cancel(*, pipeline_run: PipelineRun) -> bool:
    """Cancel a queued or running run: queued units are dropped, units in a worker's hands finish first."""
    return run_cancel(pipeline_run=pipeline_run)


def pipeline_run_resume(*, pipeline_run: PipelineRun, user, send_workers: bool = True) -> PipelineRun:
    """Run again what is not done: the run reopens its own units, however it was started (`send_workers=False`:
    the caller works them itself, as run_resume's)."""
    if not pipeline_run.units.exists() and pipeline_run.total:
        raise ResumeError("this run has no work units (it was started before the pipeline engine): start a new one")
    return run_resume(pipeline_run=pipeline_run, send_workers=send_workers)
