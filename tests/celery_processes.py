"""Real Celery workers and beat for tests about faults: each in its own process group (so a SIGKILL takes its
children too), its output in a log file, every process killed at the end.

    processes = CeleryProcesses(folder, env=celery_env(fake_base_url=..., broker_url=..., media_root=...))
    worker = processes.worker()                       # queues judge,default; prefork, 4 processes
    processes.worker(pool="threads", concurrency=20)  # as the judge queue's worker runs in production
    processes.beat()
    kill_group(worker)                                # SIGKILL the worker and its children
    processes.stop_all()
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def celery_env(*, fake_base_url: str, broker_url: str, media_root: Path, **extra: str) -> dict:
    """The environment of a worker or beat on this test's database, pointed at a fake Gemini."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.celery_worker_settings",
            "TASKGEN_WORKER_DB_NAME": str(connection.settings_dict["NAME"]), "TASKGEN_MEDIA_ROOT": str(media_root),
            "GEMINI_API_KEY": "test-key-not-real", "GOOGLE_GEMINI_BASE_URL": fake_base_url,
            "CELERY_BROKER_URL": broker_url, "REDIS_URL": broker_url, "TASKGEN_JUDGE_TIMEOUT": "20", **extra}


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a process and every child of it (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(10)


class CeleryProcesses:
    def __init__(self, folder: Path, *, env: dict) -> None:
        self.folder, self.env = Path(folder), env
        self.started: list[subprocess.Popen] = []

    def worker(self, *, queues: str = "judge,default", pool: str = "prefork", concurrency: int = 4) -> subprocess.Popen:
        name = f"worker-{uuid.uuid4().hex[:6]}"
        return self._start(name, ["worker", "-Q", queues, "--pool", pool, "--concurrency", str(concurrency),
                                  "--loglevel", "INFO", "--without-heartbeat", "--without-mingle", "--without-gossip",
                                  "-n", f"{name}@%h"])

    def beat(self) -> subprocess.Popen:
        name = f"beat-{uuid.uuid4().hex[:6]}"
        return self._start(name, ["beat", "-s", str(self.folder / name)])

    def _start(self, name: str, arguments: list[str]) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "celery", "-A", "taskgen", *arguments], cwd=ROOT,
                                   env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        process.log = self.folder / f"{name}.log"
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.started:
            kill_group(process)
