"""PostgreSQL, as Django's own backend, with one change to its connection pool (settings: ENGINE when the pool is on).

The pool checks a connection before it lends it, and after each dead one it finds it waits before the next (a second,
then two, four, eight...). After PostgreSQL ended every connection (a restart, a failover, pg_terminate_backend), a
process holding five idle connections waited out its 10 s pool timeout before it reached a live one: a web worker's
first request answered 500. Here the first dead connection found renews every idle one at once (psycopg's
`pool.check()`: one empty query each, a new connection for each that fails), so the next try gets a live one.

And a pool that could not lend a connection in time says why: its timeout alone ("couldn't get a connection after
10.00 sec") hid the server's own refusal (a database that does not exist, a wrong password, no server), so one
direct connection is tried for the reason.
"""
from __future__ import annotations

from collections.abc import Callable

import psycopg
from django.db.backends.postgresql import base
from psycopg_pool import PoolTimeout


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

    def get_new_connection(self, conn_params):
        try:
            return super().get_new_connection(conn_params)
        except PoolTimeout as exc:
            raise psycopg.OperationalError(f"{exc}: {self._why_no_connection()}") from exc

    def _why_no_connection(self) -> str:
        """The server's own answer to one direct connection, or that it would have lent one (the pool was full)."""
        params = {k: v for k, v in self.get_connection_params().items() if k != "cursor_factory"}
        try:
            psycopg.connect(**params, connect_timeout=5).close()
        except psycopg.Error as exc:
            return f"PostgreSQL refused a connection: {str(exc).strip()}"
        return f"the pool's {self.pool.max_size} connections were all in use (DATABASE_POOL_MAX_SIZE)"
