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
