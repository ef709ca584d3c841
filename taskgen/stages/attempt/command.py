"""`taskgen attempt --tasks FILE --agent scripted --name RUN [--mistakes 0.3] [--workers N] [--limit N]`.

Queues one Celery task per episode and follows the PipelineRun row until the run is imported. With --workers N
(default 2) it starts a local Celery worker with N processes on the `browser` queue for the run's duration (any
broker: the embedded one or Redis); --workers 0 leaves the episodes to workers already running; --inline runs
them one by one in this process, without Celery.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from taskgen.models import PipelineRun
from taskgen.stages.attempt.service import AttemptError, attempt_episode, attempt_finish_if_complete, attempt_prepare
from taskgen.stages.attempt.tasks import attempt_start

NAME = "attempt"
HELP = "Run a tasks file's episodes in the browser harness (one Celery task each) and import them as a run."
POLL_SECONDS = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tasks", type=Path, required=True, help="tasks.jsonl (e.g. sandbox/tasks.jsonl)")
    parser.add_argument("--agent", default="scripted", help="scripted: replays known solutions (a simulation)")
    parser.add_argument("--name", required=True, help="the run's name (its folder: DATA_ROOT/attempts/NAME)")
    parser.add_argument("--mistakes", type=float, default=0.3, help="the scripted agent's mistake rate (0..1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    parser.add_argument("--workers", type=int, default=2,
                        help="start a local Celery worker with N processes (0: use workers already running)")
    parser.add_argument("--inline", action="store_true", help="run the episodes here, one by one, without Celery")


def run(options: dict, stdout, stderr) -> int:
    try:
        start = attempt_prepare if options["inline"] else attempt_start
        pipeline_run = start(tasks_file=options["tasks"], agent=options["agent"], name=options["name"],
                             mistakes=options["mistakes"], seed=options["seed"], limit=options["limit"])
    except AttemptError as exc:
        stderr.write(f"attempt: {exc}")
        return 2
    stdout.write(f"attempt #{pipeline_run.pk}: {pipeline_run.total} episodes -> {pipeline_run.params['run_dir']}")
    if options["inline"]:
        _run_inline(pipeline_run, stdout)
    else:
        worker = _start_worker(options["workers"], pipeline_run.pk) if options["workers"] > 0 else None
        try:
            _follow(pipeline_run.pk, stdout)
        finally:
            _stop_worker(worker)
    return _report(pipeline_run.pk, stdout, stderr)


def _run_inline(pipeline_run: PipelineRun, stdout) -> None:
    for n, line in enumerate(Path(pipeline_run.params["run_dir"], "tasks.jsonl").read_text().splitlines(), 1):
        task_id = json.loads(line)["task_id"]
        outcome = attempt_episode(pipeline_run_id=pipeline_run.pk, task_id=task_id)
        stdout.write(f"  [{n}/{pipeline_run.total}] {task_id}: {_outcome_word(outcome)}")
    attempt_finish_if_complete(pipeline_run_id=pipeline_run.pk)


def _outcome_word(outcome: dict | None) -> str:
    if outcome is None:
        return "skipped (already done)"
    if outcome["error"]:
        return f"FAILED ({outcome['error']})"
    return {True: "verifier passed", False: "verifier failed", None: "no verifier"}[outcome["ok"]]


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


def _follow(pipeline_run_id: int, stdout) -> None:
    last = None
    while True:
        row = PipelineRun.objects.get(pk=pipeline_run_id)
        now = (row.done, row.failed, row.status)
        if now != last:
            stdout.write(f"  {row.done + row.failed}/{row.total} episodes ({row.failed} failed) · {row.status}")
            last = now
        if row.is_finished:
            return
        time.sleep(POLL_SECONDS)


def _report(pipeline_run_id: int, stdout, stderr) -> int:
    row = PipelineRun.objects.select_related("run").get(pk=pipeline_run_id)
    for error in row.errors[-20:]:
        stderr.write(f"  error: {error}")
    if row.status != PipelineRun.Status.DONE:
        stderr.write(f"attempt #{row.pk} ended {row.status}")
        return 1
    r = row.result
    stdout.write(f"run {row.run.name!r} (id {row.run.pk}): {r.get('episodes')} episodes, "
                 f"{r.get('verifier_pass')} passed the verifier, {r.get('failed')} failed in the harness")
    return 0
