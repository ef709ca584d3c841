"""CPU time of a benchmark's requests: this process and its PostgreSQL backend together, which a busy machine inflates
far less than wall-clock time (shared by the page benchmarks)."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def backend_pid(connection) -> int | None:
    """The PostgreSQL backend process serving this Django connection (None on other databases)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds used so far by this process and, when readable (same machine), the backend `pid`."""
    used = time.process_time()
    stat = Path(f"/proc/{pid}/stat") if pid else None
    if stat is not None and stat.exists():
        fields = stat.read_text().rsplit(")", 1)[1].split()
        used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return used


def scratch_database_ensure(url: str) -> None:
    """Create the scratch PostgreSQL database `url` names when it does not exist yet (a fresh machine has only
    `postgres` and `test`): without it the first connection waits out the pool's timeout and says nothing useful."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"made the scratch database {name!r}", flush=True)


def pid_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backends_cpu() -> dict[int, float]:
    """CPU seconds so far of every PostgreSQL backend connected to this process's database (the server's others,
    another engineer's, are not counted). None on SQLite: it runs in this process, whose CPU counts it already."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return {pid: pid_cpu(pid) for (pid,) in cursor.fetchall()}


def backends_note(seen: dict[int, float]) -> None:
    """Keep the latest CPU of every backend seen while something runs, so one that closes before its end (a
    prefork child's connection) still counts, all but its last half second."""
    for pid, cpu in backends_cpu().items():
        seen[pid] = max(cpu, seen.get(pid, 0.0))


def machine_cpu() -> tuple[float, float]:
    """The whole machine's CPU seconds so far, (busy, all), from /proc/stat: every process's, ours or not."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


def machine_settle(*, busy_under: float = 0.1, window: float = 2.0, most: float = 120.0) -> tuple[float, float]:
    """Wait until the machine is quiet: a `window` of seconds in which it was busy less than `busy_under` of its
    cores (what a step before left running, PostgreSQL's autovacuum after thousands of inserts, say, has ended), at
    most `most` seconds; (seconds waited, the last window's busy share), so a figure can say how quiet it began."""
    started = time.perf_counter()
    while True:
        busy_before, all_before = machine_cpu()
        time.sleep(window)
        busy, every = machine_cpu()
        share = (busy - busy_before) / max(every - all_before, 1e-9)
        waited = time.perf_counter() - started
        if share < busy_under or waited >= most:
            return waited, share


class BackendsSampled:
    """The PostgreSQL backends' CPU while a block runs, sampled every half second on a thread of its own (with its
    own connection): `with BackendsSampled() as backends: ...; backends.cpu`."""

    def __init__(self) -> None:
        self.cpu, self._stop, self._seen = 0.0, threading.Event(), {}

    def __enter__(self) -> BackendsSampled:
        self._before = backends_cpu()
        self._seen = dict(self._before)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(0.5):
                backends_note(self._seen)
        finally:
            connection.close()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        backends_note(self._seen)
        self.cpu = sum(cpu - self._before.get(pid, 0.0) for pid, cpu in self._seen.items())


def main(argv: list[str] | None = None) -> int:
    """`python bench/cpu.py settle [--most SECONDS]`: wait for a quiet machine (machine_settle), the rule every
    benchmark step starts on (bench/rounds.sh calls it before each step), and say how long it took."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("what", choices=["settle"])
    parser.add_argument("--most", type=float, default=300.0, help="seconds to wait at most")
    args = parser.parse_args(argv)
    waited, share = machine_settle(most=args.most)
    print(f"settled after {waited:.0f}s (the machine {share:.0%} busy over the last 2 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
