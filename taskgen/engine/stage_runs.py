"""Runners of the stages the app runs as one Celery task (import, validate, export): `stage_run(pipeline_run_id=...)`.

Stage modules are looked up when a stage runs, not when the web process imports this one.
"""
from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

from taskgen.models import JudgeConfig, PipelineRun, Run
from taskgen.pipeline_runs import (
    pipeline_run_error,
    pipeline_run_finish,
    pipeline_run_is_cancelled,
    pipeline_run_start,
)
from taskgen.stages.export.service import export_run

log = logging.getLogger(__name__)
Stage = PipelineRun.Stage


class StageUnavailable(RuntimeError):
    """The stage's module or function is not part of this install."""


class StageCancelled(RuntimeError):
    """Raised inside a running stage when an admin cancelled it, to stop between units of work."""


def stage_function(module: str, name: str) -> Callable:
    """A stage's function, found at run time; StageUnavailable when its module or function is missing."""
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # a real import error inside the stage module must not be hidden
        raise StageUnavailable(f"{module} is not part of this install") from exc
    function = getattr(found, name, None)
    if function is None:
        raise StageUnavailable(f"{module}.{name} is not part of this install")
    return function


# ── runners of the stages run by our own task ───────────────────────────────────────────────────────────────────

class ImportProgress:
    """The progress callback handed to import_run_dir: `progress(done, total)` (or keywords, or an `error=`) counts
    episodes; it raises StageCancelled when the admin cancelled, so the import stops between episodes."""

    def __init__(self, pipeline_run_id: int) -> None:
        self.pipeline_run_id = pipeline_run_id

    def __call__(self, done: int | None = None, total: int | None = None, error: str = "", **_: object) -> None:
        fields = {key: value for key, value in (("done", done), ("total", total)) if isinstance(value, int)}
        if fields:
            PipelineRun.objects.filter(pk=self.pipeline_run_id).update(**fields)
        if error:
            pipeline_run_error(pipeline_run_id=self.pipeline_run_id, error=str(error))
        if pipeline_run_is_cancelled(pipeline_run_id=self.pipeline_run_id):
            raise StageCancelled("cancelled by an admin")


def import_run(*, pipeline_run_id: int) -> None:
    """Import (again) the run dir; the importer skips episodes it already holds unchanged."""
    if not pipeline_run_start(pipeline_run_id=pipeline_run_id):
        return
    params = PipelineRun.objects.get(pk=pipeline_run_id).params
    import_run_dir = stage_function("taskgen.stages.import_.service", "import_run_dir")
    tasks_file = Path(params["tasks_file"]) if params.get("tasks_file") else None
    try:
        summary = import_run_dir(run_dir=Path(params["run_dir"]), tasks_file=tasks_file,
                                 name=params.get("name") or None, progress=ImportProgress(pipeline_run_id))
    except StageCancelled:
        return
    run = getattr(summary, "run", summary)
    if isinstance(run, Run):
        PipelineRun.objects.filter(pk=pipeline_run_id).update(run=run)
    result = summary.as_dict() if hasattr(summary, "as_dict") else {"run": getattr(run, "pk", None)}
    for skip in result.get("skipped", [])[:100]:
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=f"skipped {skip['path']}: {skip['reason']}")
    pipeline_run_finish(pipeline_run_id=pipeline_run_id, result=_json_safe(result))


def validate_run(*, pipeline_run_id: int) -> None:
    if not pipeline_run_start(pipeline_run_id=pipeline_run_id, total=1):
        return
    params = PipelineRun.objects.get(pk=pipeline_run_id).params
    compute = stage_function("taskgen.stages.validate.service", "validate_compute")
    config = JudgeConfig.objects.get(pk=params["config"])
    result = compute(runs=Run.objects.filter(pk__in=params["runs"]), config=config, against=params["against"])
    PipelineRun.objects.filter(pk=pipeline_run_id).update(done=1)
    summary = result.as_dict() if hasattr(result, "as_dict") else result
    summary = summary if isinstance(summary, dict) else {"summary": str(summary)}
    pipeline_run_finish(pipeline_run_id=pipeline_run_id, result=_json_safe(summary))


def _json_safe(value: object) -> object:
    return json.loads(json.dumps(value, default=str))


RUNNERS: dict[str, Callable[..., None]] = {Stage.IMPORT: import_run, Stage.VALIDATE: validate_run,
                                           Stage.EXPORT: export_run}


def stage_run(*, pipeline_run_id: int) -> None:
    """Run a queued PipelineRun of one of our own stages; any failure is recorded on it, never lost in a log."""
    stage = PipelineRun.objects.filter(pk=pipeline_run_id).values_list("stage", flat=True).first()
    if stage not in RUNNERS:
        log.warning("pipeline run %s: no runner for stage %r", pipeline_run_id, stage)
        return
    try:
        RUNNERS[stage](pipeline_run_id=pipeline_run_id)
    except Exception as exc:  # the run shows as failed with the reason, and can be resumed
        log.exception("pipeline run %s failed", pipeline_run_id)
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=f"{type(exc).__name__}: {exc}")
        pipeline_run_finish(pipeline_run_id=pipeline_run_id, failed=True)


