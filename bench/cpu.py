"""CPU time of a benchmark's requests: this process and its PostgreSQL backend together, which a busy machine inflates
far less than wall-clock time (shared by the page benchmarks)."""
from __future__ import annotations

import os
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
