"""`taskgen attempt --tasks FILE --agent scripted|rules|gemini|openai-compatible|external:NAME --name RUN
[--model M] [--base-url URL] [--mistakes 0.3] [--workers N] [--limit N]`.

Starts an attempt on the engine (one unit per task, on the `browser` queue) and waits with a progress bar until the
run is imported. With --workers N (default 2) it starts a local Celery worker with N processes on the `browser` queue
for the run's duration (any broker: the embedded one or Redis); --workers 0 leaves the episodes to workers already
running; --inline runs them one by one in this process, without Celery. Exit 1 names every episode not done
(`taskgen resume PIPELINE_RUN` runs exactly those again).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.wait import resume_words, run_wait, wait_report
from taskgen.harness.agents import agent_names, agent_options_from, agent_reach_lines
from taskgen.models import PipelineRun
from taskgen.providers import provider_names
from taskgen.stages.attempt.service import attempt_result_words

NAME = "attempt"
HELP = "Run a tasks file's episodes in the browser harness (one work unit each) and import them as a run."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", type=Path, required=True, help="tasks.jsonl (e.g. sandbox/tasks.jsonl)")
    parser.add_argument("--agent", default="scripted", choices=agent_names(),
                        help="which agent attempts the tasks; each can attempt: " + "; ".join(agent_reach_lines()))
    parser.add_argument("--model", default="", help="a model agent's model (default: the provider's)")
    parser.add_argument("--base-url", default="",
                        help=f"{', '.join(provider_names('server_url'))}: the server's URL, e.g. "
                             "http://127.0.0.1:8001/v1 (default: OPENAI_BASE_URL)")
    parser.add_argument("--arm", default="base", help="an external harness's arm ({arm} in its command)")
    parser.add_argument("--images", choices=("yes", "no"), default=None,
                        help="whether the model gets screenshots (default: TASKGEN_OPENAI_IMAGES)")
    parser.add_argument("--name", required=True, help="the run's name (its folder: DATA_ROOT/attempts/NAME)")
    parser.add_argument("--mistakes", type=float, default=0.3, help="the scripted agent's mistake rate (0..1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--workers", type=int, default=2,
                        help="start a local Celery worker with N processes (0: use workers already running)")
    parser.add_argument("--inline", action="store_true", help="run the episodes here, one by one, without Celery")
    parser.add_argument("--stall-seconds", type=float, default=600,
                        help="stop waiting (exit 1) when no episode finished for this long")


def run(options: dict, stdout, stderr) -> int:
    params = {key: options.get(key) for key in ("agent", "name", "mistakes", "seed", "limit")}
    params["agent_options"] = agent_options_from(options)
    try:
        pipeline_run = run_start(stage=PipelineRun.Stage.ATTEMPT,
                                 params={**params, "tasks_file": str(options["tasks"])})
    except StageParamsError as exc:
        stderr.write(f"attempt: {exc}")
        return 2
    stdout.write(f"attempt #{pipeline_run.pk}: {pipeline_run.total} episodes -> {pipeline_run.params['run_dir']}")
    if note := pipeline_run.params.get("reach_note"):
        stderr.write(f"attempt: note: {note}")
    inline = bool(options.get("inline"))
    workers = 0 if inline else options.get("workers", 2)
    worker = _start_worker(workers, pipeline_run.pk) if workers > 0 else None
    try:
        waited = run_wait(pipeline_run=pipeline_run, stream=stdout, work_here=1 if inline else 0,
                          stall_seconds=options.get("stall_seconds") or 600)
    finally:
        _stop_worker(worker)
    # A resume works what is not done here: the worker this command started stops with it.
    code = wait_report(waited=waited, stream=stderr, resume_here=1)
    return _report(waited.pipeline_run, stdout, stderr, resume_said=bool(code)) or code


def _start_worker(processes: int, pipeline_run_id: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "celery", "-A", "taskgen", "--quiet", "worker", "-Q", "browser", "--concurrency",
           str(processes), "--pool", "prefork", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
           "-n", f"attempt-{pipeline_run_id}@%h"]
    logs = Path(settings.VAR_DIR) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"attempt-{pipeline_run_id}-worker.log").open("ab") as out:  # the terminal shows progress only
        return subprocess.Popen(cmd, env=dict(os.environ), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def _stop_worker(worker: subprocess.Popen | None) -> None:
    if worker is None:
        return
    worker.terminate()  # a warm shutdown: the worker finishes nothing new and exits
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def _report(pipeline_run: PipelineRun, stdout, stderr, *, resume_said: bool) -> int:
    pipeline_run.refresh_from_db()
    if pipeline_run.status != PipelineRun.Status.DONE:
        stderr.write(f"attempt #{pipeline_run.pk} ended {pipeline_run.status}")
        for error in pipeline_run.errors[-5:]:
            stderr.write(f"  error: {error}")
        if not resume_said:
            stderr.write(resume_words(pipeline_run=pipeline_run, work_here=1))
        return 1
    r, run = pipeline_run.result, pipeline_run.run
    stdout.write(f"run {run.name!r} (id {run.pk}): {attempt_result_words(r)}")
    return 0
