"""The chaos soak's processes and the faults it does to them (bench/chaos.py runs the soak).

Every process is the soak's own: a redis-server on another port (append-only, so a restart keeps its data unless
the fault wipes it), gunicorn with the production settings, the Celery workers of the three queues as production
runs them, and beat. PostgreSQL is the machine's: a fault there only terminates the connections to the soak's own
database (pg_terminate_backend), never the server.
"""
from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.serve import _gunicorn
from tests.celery_processes import CeleryProcesses, kill_group
from tests.redis_server import RedisServer

# The workers as docker-compose.yml runs them (the judge queue in threads; one Chromium at a time on this machine).
WORKERS = {
    "judge worker": {"queues": "judge", "pool": "threads", "concurrency": 20},
    "browser worker": {"queues": "browser", "pool": "prefork", "concurrency": 1},
    "default worker": {"queues": "default", "pool": "prefork", "concurrency": 2},
}
RESTART_AFTER = (1.0, 4.0)  # seconds a supervisor takes to start a killed process again


class Services:
    """Start, kill and restart the soak's processes by role; a lock keeps two faults from restarting one role at
    once."""

    def __init__(self, folder: Path, *, env: dict, redis_port: int, web_port: int, web_workers: int,
                 secret_key: str) -> None:
        self.folder, self.web_port, self.web_workers, self.secret_key = folder, web_port, web_workers, secret_key
        (folder / "redis").mkdir(parents=True, exist_ok=True)
        self.redis = RedisServer(redis_port, folder / "redis", persist=True)
        self.celery = CeleryProcesses(folder, env=env)
        self.roles: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def start_all(self) -> None:
        self.redis.start()
        for role in [*WORKERS, "beat", "web"]:
            self.start(role)

    def start(self, role: str) -> None:
        if role == "web":
            self.roles[role] = _gunicorn(self.web_port, self.web_workers, self.folder / "gunicorn.log",
                                         secret_key=self.secret_key)
        elif role == "beat":
            self.roles[role] = self.celery.beat()
        else:
            self.roles[role] = self.celery.worker(**WORKERS[role])

    def kill(self, role: str) -> None:
        kill_group(self.roles[role])

    def stop_all(self) -> None:
        for process in self.roles.values():
            kill_group(process)
        self.redis.kill()


@dataclass
class Fault:
    """One kind of fault: what it does, and how many times it was tried."""

    name: str
    do: object  # Callable[[Services, random.Random], None]
    tried: list[float] = field(default_factory=list)  # when (monotonic) each try began


def _kill_and_restart(role: str):
    def do(services: Services, rng: random.Random) -> None:
        with services.lock:
            services.kill(role)
            time.sleep(rng.uniform(*RESTART_AFTER))
            services.start(role)
    return do


def _redis_restart(wipe: bool):
    def do(services: Services, rng: random.Random) -> None:
        with services.lock:
            services.redis.kill()
            if wipe:
                services.redis.wipe()
            time.sleep(rng.uniform(*RESTART_AFTER))
            services.redis.start()
    return do


def _web_restart(services: Services, rng: random.Random) -> None:
    """What a redeploy does: SIGTERM (gunicorn finishes the requests in hand), then a new server."""
    with services.lock:
        web = services.roles["web"]
        web.send_signal(signal.SIGTERM)
        try:
            web.wait(30)
        except subprocess.TimeoutExpired:
            kill_group(web)
        services.start("web")


def _postgres_terminate(services: Services, rng: random.Random) -> None:
    """Every connection to the soak's database ends (as when PostgreSQL restarts), but the one that asks."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def faults() -> list[Fault]:
    return [
        Fault("SIGKILL judge worker", _kill_and_restart("judge worker")),
        Fault("SIGKILL browser worker", _kill_and_restart("browser worker")),
        Fault("SIGKILL default worker", _kill_and_restart("default worker")),
        Fault("SIGKILL beat", _kill_and_restart("beat")),
        Fault("Redis restarted with its data", _redis_restart(wipe=False)),
        Fault("Redis restarted empty", _redis_restart(wipe=True)),
        Fault("PostgreSQL connections terminated", _postgres_terminate),
        Fault("web server restarted (SIGTERM)", _web_restart),
        Fault("web server SIGKILLed", _kill_and_restart("web")),
    ]


def schedule(kinds: list[Fault], *, seconds: float, seed: int) -> list[tuple[float, Fault]]:
    """When each fault happens (seconds from the start): rounds of every kind in a seeded order, spread evenly from
    15 s in to 15 s before the end with a seeded jitter; at least one round, about one fault every 30 s."""
    rng = random.Random(seed)
    rounds = max(1, round(seconds / 30 / len(kinds)))
    order = []
    for _ in range(rounds):
        order += rng.sample(kinds, len(kinds))
    span = max(1.0, seconds - 30)
    step = span / len(order)
    return [(15 + step * (n + rng.uniform(0.1, 0.9)), fault) for n, fault in enumerate(order)]

