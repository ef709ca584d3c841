"""Benchmark: episodes per minute of `taskgen attempt` with the scripted agent at 1 and 2 Celery worker processes,
and where an episode's time goes (Chromium versus the app: the sandbox server, evidence, verifier, files).

Runs in a throwaway var dir (its own SQLite database and embedded broker), so it touches nothing of yours:
    .venv/bin/python bench/attempt.py [--episodes 62] [--workers 1,2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _manage(env: dict, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _episode_window(env: dict, name: str) -> float:
    """Seconds from the first episode starting to the last one finishing, from the PipelineRun row."""
    code = (f"from taskgen.models import PipelineRun as P; r = P.objects.filter(params__name={name!r}).get(); "
            "print((r.finished_at - r.started_at).total_seconds())")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def _shares(env: dict, name: str) -> dict:
    """Where the episodes' time went, from their work units' results (each episode's timings)."""
    code = (f"import json; from taskgen.models import WorkUnit as U; print(json.dumps([u.get('timings', {{}}) for u in "
            f"U.objects.filter(pipeline_run__params__name={name!r}, status='done').values_list('result', flat=True)]))")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    totals: dict[str, float] = {}
    for timings in json.loads(out.strip().splitlines()[-1]):
        for key, seconds in timings.items():
            totals[key] = totals.get(key, 0.0) + seconds
    server = totals.get("sandbox_server", 0.0)
    browser = max(0.0, totals.get("browser", 0.0) - server)  # the browser phase waits on the server's pages
    app = server + totals.get("app", 0.0) + totals.get("write", 0.0) + totals.get("agent", 0.0)
    whole = browser + app or 1.0
    return {"browser": browser / whole, "app": app / whole, "server": server / whole}


def bench(workers: int, episodes: int, var: Path) -> None:
    env = {**os.environ, "TASKGEN_VAR_DIR": str(var), "CELERY_BROKER_URL": "filesystem://"}
    env.pop("DATABASE_URL", None)
    _manage(env, "migrate", "--no-input")
    name = f"bench-{workers}w"
    wall = _manage(env, "taskgen", "attempt", "--tasks", "sandbox/tasks.jsonl", "--agent", "scripted",
                   "--name", name, "--limit", str(episodes), "--workers", str(workers), "--mistakes", "0.3")
    window = _episode_window(env, name)
    shares = _shares(env, name)
    print(f"workers={workers}: {episodes} episodes in {window:.1f}s of episodes = {episodes * 60 / window:.1f} "
          f"episodes/min ({episodes * 60 / wall:.1f}/min counting worker start and import, {wall:.1f}s); "
          f"time in the browser {shares['browser']:.0%}, in the app {shares['app']:.0%} "
          f"(of which the sandbox server {shares['server']:.0%})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=62)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    print(f"bench/attempt.py: scripted agent (simulation), mistake rate 0.3, {os.cpu_count()} CPUs", flush=True)
    for workers in (int(w) for w in args.workers.split(",")):
        with tempfile.TemporaryDirectory(prefix="taskgen-bench-") as var:
            bench(workers, args.episodes, Path(var))
    return 0


if __name__ == "__main__":
    sys.exit(main())
