"""PostgreSQL, as Django's own backend, with one change to its connection pool (settings: ENGINE when the pool is on).

The pool checks a connection before it lends it, and after each dead one it finds it waits before the next (a second,
then two, four, eight...). After PostgreSQL ended every connection (a restart, a failover, pg_terminate_backend), a
process holding five idle connections waited out its 10 s pool timeout before it reached a live one: a web worker's
first request answered 500. Here the first dead connection found renews every idle one at once (psycopg's
`pool.check()`: one empty query each, a new connection for each that fails), so the next try gets a live one.
"""
from __future__ import annotations

from collections.abc import Callable

from django.db.backends.postgresql import base


def _check_or_renew_all(pool) -> Callable:
    def check(conn) -> None:
        try:
            pool.check_connection(conn)
        except Exception:
            pool.check()  # the others are likely dead too: test them all now, replace the dead ones
            raise

    return check


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        if pool is not None and pool._check is not None and not getattr(pool, "renews_all_when_one_is_dead", False):
            pool._check = _check_or_renew_all(pool)  # psycopg_pool keeps the check it calls there
            pool.renews_all_when_one_is_dead = True
        return pool
