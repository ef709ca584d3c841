"""`taskgen import RUN_DIR [--tasks FILE] [--name NAME]`: import a reference run dir as a run of the import stage on
the engine (on the pipeline page, resumable with `taskgen resume`), worked here; a summary at the end."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait, wait_report
from taskgen.models import PipelineRun
from taskgen.stages.import_.work import IMPORT_PROGRESS, IMPORT_WORK

NAME = "import"
HELP = "Import a run dir (tasks, episodes, screenshots, rows, verifier results, an existing <RUN_DIR>_judge folder)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    parser.add_argument("--tasks", type=Path, default=None,
                        help="tasks file (default: RUN_DIR/tasks.jsonl, else a tasks.jsonl beside RUN_DIR)")
    parser.add_argument("--name", default=None, help="the run's name (default: the folder's name)")
    parser.add_argument("--stall-seconds", type=float, default=IMPORT_WORK.unit_seconds,
                        help="stop waiting (exit 1) when a worker elsewhere holds the import this long")


def _progress_bar(stream) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A tqdm bar on a terminal only; logs and pipes get the summary alone."""
    if not stream.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=0, unit="episode", file=stream, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update, bar.close


def summary_lines(summary: dict) -> list[str]:
    """The import's summary (the import unit's result, ImportSummary.as_dict) as the command prints it."""
    s = summary
    lines = [
        f"run {s['run']!r} (id {s['run_id']})",
        f"episodes: {s['episodes_added']} added, {s['episodes_updated']} updated, "
        f"{s['episodes_unchanged']} unchanged",
        f"screenshots: {s['screenshots']} stored",
        f"tasks: {s['tasks_added']} added, {s['tasks_updated']} updated, {s['tasks_without_episode']} without an "
        "episode folder",
        f"verifier results: {s['verifier_results']} new or changed, {s['verifier_results_unchanged']} unchanged",
        f"judgments: {s['judgments']} new or changed, {s['judgments_unchanged']} unchanged",
        f"skipped: {len(s['skipped'])}",
    ]
    return lines + [f"  {skip['path']}: {skip['reason']}" for skip in s["skipped"]]


def import_here(*, params: dict, stderr, stall_seconds: float | None = None) -> tuple[PipelineRun | None, dict | None]:
    """Import a run dir as a run of the import stage (it shows on the Pipeline page, and resumes) worked in this
    process with a progress bar: (the pipeline run, the import's summary), the summary None when the import failed
    (the reason written to stderr, the pipeline run None when the parameters were refused)."""
    try:
        pipeline_run = run_start(stage=PipelineRun.Stage.IMPORT, params=params, send_workers=False)
    except StageParamsError as exc:
        stderr.write(f"import failed: {exc}")
        return None, None
    progress, close = _progress_bar(sys.stderr)
    token = IMPORT_PROGRESS.set(progress)  # the unit is worked on this thread: its episodes move the bar
    try:
        waited = run_wait(pipeline_run=pipeline_run, stream=stderr, work_here=1,
                          stall_seconds=stall_seconds or IMPORT_WORK.unit_seconds)
    finally:
        IMPORT_PROGRESS.reset(token)
        close()
    if wait_report(waited=waited, stream=stderr):
        stderr.write("import failed")
        return pipeline_run, None
    return pipeline_run, waited.pipeline_run.result


def run(options: dict, stdout, stderr) -> int:
    params = {"run_dir": str(options["run_dir"]), "tasks_file": str(options["tasks"] or ""),
              "name": options["name"] or ""}
    _, summary = import_here(params=params, stderr=stderr, stall_seconds=options.get("stall_seconds"))
    if summary is None:
        return 1
    stdout.write("\n".join(summary_lines(summary)))
    if summary["episodes_imported"] == 0:
        stderr.write("nothing could be imported")
        return 1
    return 0
