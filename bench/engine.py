"""The engine's overhead per unit, and the time from a killed worker to its run's end.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME CELERY_BROKER_URL=redis://127.0.0.1:6379/N \
        .venv/bin/python bench/engine.py [--units 10000] [--batches 1,100] [--kill-units 1000]

1. Overhead: a no-op stage (bench/engine_stage.py, registered here only) with --units units, created, then worked in
   this process through the engine's own `work()` (lease a batch, do each, record the batch, refresh the run) until
   the run is finished. Prints CPU ms per unit (this process and its PostgreSQL backend) and queries per unit, for
   each lease batch size. Target: under 2 ms and 3 queries per unit.
2. Recovery: --kill-units units of 10 ms each on a real worker (`celery -A bench.engine_worker worker -B`, two
   processes, the engine's default leases and reconciler, or --short: 5 s leases, the reconciler every second);
   SIGKILL the worker and its children at 40%, start another, and time the kill to the run's end.
The run rows it makes are deleted at the end. Prints the machine's load beside every figure; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

import taskgen.engine.send as engine_send  # noqa: E402
from bench.cpu import backend_pid, cpu_seconds  # noqa: E402
from bench.engine_stage import NAME, register  # noqa: E402
from taskgen.engine.control import run_start  # noqa: E402
from taskgen.engine.worker import work  # noqa: E402
from taskgen.models import PipelineRun, WorkUnit  # noqa: E402

SHORT = {"TASKGEN_ENGINE_LEASE_SECONDS": "5", "TASKGEN_ENGINE_RECONCILE_SECONDS": "1",
         "TASKGEN_ENGINE_WAKE_AGAIN_SECONDS": "2", "TASKGEN_ENGINE_SLICE_SECONDS": "10"}


class Counter:
    """Counts the queries this connection runs."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def overhead(units: int, batch: int) -> None:
    register(batch=batch)
    engine_send.dispatch = lambda *args, **kwargs: True  # this process works the units; no worker is sent
    pid, counter = backend_pid(connection), Counter()
    with connection.execute_wrapper(counter):
        cpu, wall = cpu_seconds(pid), time.perf_counter()
        pipeline_run = run_start(stage=NAME, params={"units": units})
        made_cpu, made_q, made_wall = cpu_seconds(pid) - cpu, counter.n, time.perf_counter() - wall
        counter.n, cpu, wall = 0, cpu_seconds(pid), time.perf_counter()
        while work(pipeline_run_id=pipeline_run.pk, owner="bench") is not None:
            pass
        work_cpu, work_q, work_wall = cpu_seconds(pid) - cpu, counter.n, time.perf_counter() - wall
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and pipeline_run.done == units, (pipeline_run.status, pipeline_run.done)
    print(f"  batch {batch:>4}: {units:,} units created in {made_wall:.2f} s "
          f"({made_cpu / units * 1000:.3f} ms cpu, {made_q / units:.3f} queries per unit); worked in {work_wall:.2f} s "
          f"({work_cpu / units * 1000:.3f} ms cpu, {work_q / units:.3f} queries per unit); "
          f"together {(made_cpu + work_cpu) / units * 1000:.3f} ms cpu and {(made_q + work_q) / units:.2f} queries "
          f"per unit ({_load()})", flush=True)
    pipeline_run.delete()


def _worker(env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bench.engine_worker", "worker", "-B", "-s", str(log) + ".beat",
         "-Q", "default", "--pool", "prefork", "--concurrency", "2", "--loglevel", "WARNING", "--without-heartbeat",
         "--without-mingle", "--without-gossip", "-n", f"bench-{time.monotonic_ns()}@%h"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(10)


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def recovery(units: int, folder: Path, short: bool) -> None:
    register(batch=10)
    engine_send.dispatch = lambda *args, **kwargs: False  # the worker's beat sends the workers
    env = {**os.environ, **(SHORT if short else {}), "BENCH_ENGINE_BATCH": "10"}
    terms = ("leases 5 s, reconciler 1 s" if short else
             f"default leases {settings.ENGINE_LEASE_SECONDS} s, reconciler {settings.ENGINE_RECONCILE_SECONDS} s")
    pipeline_run = run_start(stage=NAME, params={"units": units, "seconds": 0.01})
    settled = WorkUnit.objects.filter(pipeline_run=pipeline_run, status="done")
    first = _worker(env, folder / "worker-1.log")
    second = None
    try:
        if not _wait(lambda: settled.count() >= units * 0.4, 300):
            print(f"  recovery: the first worker did not reach 40% in 300 s (see {folder})")
            return
        _kill(first)
        killed_at, done_at_kill = time.perf_counter(), settled.count()
        second = _worker(env, folder / "worker-2.log")
        finished = _wait(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 300)
        took = time.perf_counter() - killed_at
        pipeline_run.refresh_from_db()
        again = WorkUnit.objects.filter(pipeline_run=pipeline_run, attempts__gt=1).count()
        print(f"  recovery: worker SIGKILLed at {done_at_kill}/{units} units done; the run "
              f"{'finished' if finished else 'did NOT finish'} {took:.1f} s later ({pipeline_run.done} done, "
              f"{pipeline_run.failed} failed, {again} units run again after the kill; {terms}, "
              f"a new worker's start included; {_load()})", flush=True)
    finally:
        _kill(first)
        if second is not None:
            _kill(second)
        pipeline_run.delete()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=10_000)
    parser.add_argument("--batches", default="1,100")
    parser.add_argument("--kill-units", type=int, default=1000)
    parser.add_argument("--short", action="store_true", help="5 s leases and the reconciler every second")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)  # the database in use must hold the engine's tables
    print(f"bench/engine.py on {connection.vendor} ({_load()})", flush=True)
    print("engine overhead per unit (no-op units; target < 2 ms cpu and < 3 queries per unit):")
    for batch in (int(b) for b in args.batches.split(",")):
        overhead(args.units, batch)
    if args.kill_units and connection.vendor != "postgresql":
        print("  recovery: skipped (several worker processes writing at once: run it on PostgreSQL, DATABASE_URL)")
    elif args.kill_units:
        folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-engine-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        recovery(args.kill_units, folder, args.short)
    return 0


if __name__ == "__main__":
    sys.exit(main())
