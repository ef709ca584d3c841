"""After PostgreSQL ended this process's connections (a restart, a failover, pg_terminate_backend).

The pool checks each connection before it lends it (settings: CONN_HEALTH_CHECKS), but it backs off after each dead
one it finds (a second, then two, four...): a process holding ten idle connections waited out its 10 s pool timeout
before it found a live one. Who meets a dead connection renews them all at once instead.
"""
from __future__ import annotations

import contextlib

from django.db import connection


def connections_renew() -> None:
    """Drop this thread's connection and every idle pooled one that no longer works (psycopg's `pool.check()`: one
    empty query each, replaced by a new connection), so the next query gets a live connection at once."""
    with contextlib.suppress(Exception):  # a connection the server ended may fail to close too
        connection.close()
    pool = connection.pool if connection.vendor == "postgresql" else None
    if pool is not None:
        with contextlib.suppress(Exception):
            pool.check()
