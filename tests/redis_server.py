"""A redis-server of our own on another port, for tests and benchmarks that stop, freeze or restart Redis (the
machine's own Redis is never touched).

    server = RedisServer(None, tmp_path).start()   # a free port of its own; server.url -> redis://127.0.0.1:PORT/0
    server.freeze(); server.thaw()                 # SIGSTOP / SIGCONT: connections hang, nothing is refused
    server.kill(); server.start()                  # the same port again; without persistence everything is gone
    RedisServer(None, tmp_path, persist=True)      # append-only: a restart keeps what was written

A fixed port collided with another test run on the same machine (parallel workers, two checkouts): the other run's
server answered, and was taken for ours. The port is a free one, chosen once, and start() checks that the server
answering on it is the process it started.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.ports import free_port


class RedisServer:
    def __init__(self, port: int | None, folder: Path, *, persist: bool = False) -> None:
        self.port, self.folder, self.persist = port or free_port(), Path(folder), persist
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        persistence = ["--appendonly", "yes", "--appendfsync", "everysec"] if self.persist else ["--appendonly", "no"]
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not self.answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.1)
        if self._answering_pid() != self.process.pid:
            self.process.kill()
            raise RuntimeError(f"port {self.port} is another redis-server's, not the one this test started")
        return self

    def _answering_pid(self) -> int | None:
        import redis

        try:
            return int(redis.Redis(port=self.port, socket_timeout=2).info("server")["process_id"])
        except (redis.RedisError, KeyError, ValueError):
            return None

    def answers(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: connections are refused from now on (a frozen server is thawed first so it can die)."""
        if self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def freeze(self) -> None:
        """SIGSTOP: the port still accepts connections (the kernel's backlog), but nothing is ever answered."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def wipe(self) -> None:
        """Forget the append-only file, so the next start begins empty."""
        for path in self.folder.glob("appendonly*"):
            if path.is_dir():
                for inner in path.iterdir():
                    inner.unlink()
                path.rmdir()
            else:
                path.unlink()
