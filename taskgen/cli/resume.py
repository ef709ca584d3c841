"""`taskgen resume PIPELINE_RUN [--workers N]`: run again what a run did not finish (failed, cancelled or lost
units), however it was started, and wait for it with a progress bar; exit 1 naming every unit not done."""
from __future__ import annotations

import argparse

from taskgen.engine.stage_table import stage_work
from taskgen.engine.wait import run_wait, wait_report
from taskgen.models import PipelineRun
from taskgen.stages.begin import ResumeError, pipeline_run_resume

NAME = "resume"
HELP = "Resume a pipeline run (its id, as on the pipeline page): only the units not done run again."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline_run", type=int, metavar="PIPELINE_RUN", help="the pipeline run's id")
    parser.add_argument("--workers", type=int, default=0,
                        help="work its units here with N threads (no Celery workers are sent for it then)")
    parser.add_argument("--stall-seconds", type=float, default=600,
                        help="stop waiting (exit 1) when no unit finished for this long")
    parser.add_argument("--no-wait", action="store_true", help="resume and return at once")


def run(options: dict, stdout, stderr) -> int:
    pipeline_run = PipelineRun.objects.filter(pk=options["pipeline_run"]).first()
    if pipeline_run is None:
        stderr.write(f"resume: there is no pipeline run {options['pipeline_run']}")
        return 2
    try:
        pipeline_run = pipeline_run_resume(pipeline_run=pipeline_run, user=None,
                                           send_workers=not options["workers"])
    except (ResumeError, ValueError) as exc:
        stderr.write(f"resume: {exc}")
        return 2
    stdout.write(f"resumed {pipeline_run}: {pipeline_run.total - pipeline_run.done} units to do")
    if options["no_wait"] or not pipeline_run.units.exists():
        return 0
    waited = run_wait(pipeline_run=pipeline_run, stream=stderr,
                      work_here=_threads_here(pipeline_run, options["workers"]),
                      stall_seconds=options["stall_seconds"])
    return wait_report(waited=waited, stream=stderr)


def _threads_here(pipeline_run: PipelineRun, workers: int) -> int:
    """The threads that work the run here: as its stage works with --workers N (the judge: N calls in flight and a
    few threads more, its provider loading now), else N."""
    work = stage_work(pipeline_run.stage)
    if not workers or work.here is None:
        return workers
    return work.here(work.read(pipeline_run.params), workers)
