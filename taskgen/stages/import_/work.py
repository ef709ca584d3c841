"""The import stage as the engine runs it: one unit per run dir (the importer is idempotent and writes one
transaction per episode, so a unit tried again after a lost worker re-reads the folder and adds only what is
missing). The unit's result is the import's summary."""
from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from taskgen.engine.contract import StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.models import PipelineRun, WorkUnit
from taskgen.stages.import_.files import ImportFailed
from taskgen.stages.import_.tasks_file import tasks_file_locate

UNIT = "run-dir"
# The command line's progress bar, set while it works the unit on its own thread (the engine's bar counts units,
# and an import is one): called with (episodes done, episodes) as the importer goes.
IMPORT_PROGRESS: ContextVar[Callable[[int, int], None] | None] = ContextVar("import_progress", default=None)


@dataclass(frozen=True)
class ImportParams(StageParams):
    """The run dir to import, its tasks file (empty: the importer looks beside the run dir) and the run's name."""

    run_dir: str
    tasks_file: str = ""
    name: str = ""


def import_params_check(raw: dict) -> ImportParams:
    run_dir = Path(str(raw.get("run_dir") or "")).absolute()
    if not run_dir.is_dir():
        raise StageParamsError(f"{run_dir} is not a folder")
    tasks_file = str(raw.get("tasks_file") or "")
    if tasks_file and not Path(tasks_file).is_file():
        raise StageParamsError(f"{tasks_file} is not a file")
    try:  # found now, so a run dir with no tasks file is refused at once rather than failing its unit three times
        tasks = tasks_file_locate(run_dir=run_dir, tasks_file=Path(tasks_file).absolute() if tasks_file else None)
    except ImportFailed as exc:
        raise StageParamsError(str(exc)) from exc
    return ImportParams(run_dir=str(run_dir), tasks_file=str(tasks), name=str(raw.get("name") or ""))


def _do(pipeline_run: PipelineRun, params: ImportParams, key: str) -> dict:
    from taskgen.stages.import_.service import import_run_dir  # when an import runs, not at every process's start

    summary = import_run_dir(run_dir=Path(params.run_dir), tasks_file=Path(params.tasks_file) if params.tasks_file
                             else None, name=params.name or None, progress=IMPORT_PROGRESS.get())
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(run=summary.run)
    return json.loads(json.dumps(summary.as_dict(), default=str))


def _finish(pipeline_run: PipelineRun, params: ImportParams, failed: int) -> dict:
    unit = WorkUnit.objects.filter(pipeline_run=pipeline_run, key=UNIT).values("result", "last_error").first()
    result = (unit or {}).get("result") or {"error": (unit or {}).get("last_error", "")}
    pipeline_run.errors = [*pipeline_run.errors, *(f"skipped {s['path']}: {s['reason']}"
                                                    for s in result.get("skipped", [])[:100])]
    return result


IMPORT_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.IMPORT, check=import_params_check, read=ImportParams.from_json, units=lambda p: [UNIT],
    do=_do, finish=_finish, queue="default", batch=1, unit_seconds=3300,
))
