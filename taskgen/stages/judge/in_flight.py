"""How many judge calls one process keeps in flight, and how many threads it takes to keep them in flight.

One home for the rule: settings (a judge worker's thread count), the command line (`taskgen judge --workers N`)
and the judge's model call (taskgen/stages/judge/service.py) all read it here.
"""
from __future__ import annotations

import threading

from django.conf import settings


class CallsInFlight:
    """At most `limit` model calls in flight from this process at once, whatever its thread count: a judge worker
    runs a few more threads than calls (settings.JUDGE_THREADS) so the next episode is prepared and the last one
    stored while the others wait on the model; only the call's HTTP exchange holds a place (the SDK's building of
    the request and reading of the answer do not: taskgen/providers/exchanges.py)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._places = threading.BoundedSemaphore(limit)

    def __enter__(self) -> CallsInFlight:
        self._places.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._places.release()


_in_flight: CallsInFlight | None = None
_chosen: int | None = None
_lock = threading.Lock()


def calls_in_flight() -> CallsInFlight:
    """This process's limit on judge calls in flight: settings.JUDGE_CONCURRENCY, unless the command line chose
    another (`calls_in_flight_choose`, for `taskgen judge --workers N`)."""
    global _in_flight
    wanted = _chosen or settings.JUDGE_CONCURRENCY
    with _lock:
        if _in_flight is None or _in_flight.limit != wanted:
            _in_flight = CallsInFlight(wanted)
        return _in_flight


def calls_in_flight_choose(limit: int | None) -> None:
    """Keep `limit` calls in flight in this process from now on (None: back to the setting)."""
    global _chosen
    _chosen = limit
