"""What `make demo` needs beyond the pipeline: the demo login remembered for the final banner, and the web server
and Celery workers started together and stopped together, quickly, on Ctrl-C.

The login is kept in VAR_DIR/demo-login.json (readable by its owner only, never committed), so the banner printed
when the servers are up can say it again; once someone changes that password in the admin, the banner says so
instead of showing a stale one.

The servers run in their own process groups with their output in VAR_DIR/logs/, so the terminal shows the banner
and nothing else. On Ctrl-C (or SIGTERM) the worker's main process gets a warm shutdown (SIGTERM: finish the current
task) for WARM_SECONDS, then a cold one (SIGQUIT), then SIGKILL for its whole group: everything is gone within
STOP_SECONDS, and work a killed task held is queued again by the pipeline (late acks, work units).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

WARM_SECONDS, COLD_SECONDS, STOP_SECONDS = 5.0, 2.0, 10.0


def _login_file() -> Path:
    return Path(settings.VAR_DIR) / "demo-login.json"


def demo_login_remember(*, username: str, password: str) -> None:
    path = _login_file()
    path.write_text(json.dumps({"username": username, "password": password}), encoding="utf-8")
    path.chmod(0o600)


def demo_login_words() -> str:
    """The demo login as the banner says it: name and password while the password is still the one made."""
    try:
        saved = json.loads(_login_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "log in with your own account (make one: python manage.py createsuperuser)"
    user = get_user_model().objects.filter(username=saved.get("username")).first()
    if user is None:
        return "log in with your own account (the demo login was deleted)"
    if not user.check_password(saved.get("password") or ""):
        return f"log in as {user.username} (its password was changed since it was made)"
    return f"log in as {user.username} / {saved['password']}"


@dataclass
class Server:
    name: str
    process: subprocess.Popen
    log: Path


def _start(name: str, args: list[str], logs: Path) -> Server:
    log = logs / f"demo-{name}.log"
    with log.open("ab") as out:  # the child keeps its own copy of the file descriptor
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, cwd=settings.BASE_DIR)
    return Server(name, process, log)


def servers_start(*, host: str, port: int, concurrency: int = 2) -> list[Server]:
    """The Celery workers (default and browser queues in processes, with Celery beat inside for the engine's
    reconciler; the judge queue in threads) and the web server, each in its own process group, output to logs/."""
    logs = Path(settings.VAR_DIR) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    celery = [python, "-m", "celery", "-A", "taskgen", "worker", "--loglevel", "INFO"]
    worker = [*celery, "-B", "-Q", "default,browser", "--concurrency", str(concurrency), "-n", "demo@%h"]
    web = [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"]
    return [_start("worker", worker, logs), _start("judge-worker", judge_worker_command(celery), logs),
            _start("web", web, logs)]


def judge_worker_command(celery: list[str]) -> list[str]:
    """The `judge` queue's worker: a model call waits on the network, so one process keeps
    settings.JUDGE_CONCURRENCY calls in flight with settings.JUDGE_THREADS threads (as docker-compose's
    worker-judge does)."""
    return [*celery, "-Q", "judge", "-P", "threads", "--concurrency", str(settings.JUDGE_THREADS),
            "-n", "judge@%h"]


def wait_until_serving(url: str, servers: list[Server], timeout: float = 60.0) -> bool:
    """True once the web server answers (a login redirect counts); False if a server died or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(s.process.poll() is not None for s in servers):
            return False
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - our own server on loopback
                return True
        except OSError:
            time.sleep(0.3)
    return False


def _signal(server: Server, sig: int, *, group: bool = False) -> None:
    """Signal the server's own process, or its whole group (its children: the prefork pool, Chromium)."""
    try:
        os.killpg(server.process.pid, sig) if group else server.process.send_signal(sig)
    except ProcessLookupError:
        pass


def _wait(servers: list[Server], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(s.process.poll() is not None for s in servers):
            return True
        time.sleep(0.1)
    return False


def servers_stop(servers: list[Server]) -> float:
    """Stop every server within STOP_SECONDS: warm, then cold, then killed, each whole process group. Returns the
    seconds it took."""
    started = time.monotonic()
    # Only the main process is asked first: a Celery pool child killed under its parent leaves the parent waiting.
    for server in servers:
        _signal(server, signal.SIGTERM)
    if not _wait(servers, WARM_SECONDS):
        for server in servers:
            _signal(server, signal.SIGQUIT)
        if not _wait(servers, COLD_SECONDS):
            for server in servers:
                _signal(server, signal.SIGKILL, group=True)
            _wait(servers, STOP_SECONDS - WARM_SECONDS - COLD_SECONDS)
    for server in servers:  # the group may hold children (prefork pool, Chromium) whose parent is already gone
        _signal(server, signal.SIGKILL, group=True)
    return time.monotonic() - started
