"""A limit on a process's model calls held only while each call's HTTP exchange is on the wire.

A caller that keeps N calls in flight (the judge: taskgen/stages/judge/in_flight.py) hands its places to
`exchanges_limited`; the providers' HTTP transport (body_deadline.py, under every SDK client here) takes a place when
it sends a request and gives it back once the answer's body is read. Held around the whole SDK call instead, each
place also covered the SDK's building of the request and its reading of the answer on either side of the wire (a
few ms of CPU each, longer while other threads hold the GIL): at 16 places and 300 ms answers, 15.4 calls were on the
wire on average instead of 16. A provider with no HTTP exchange (the offline rules judge) takes no place.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar


class _Hold:
    """One call's hold on a place: taken at most once at a time, given back at most once."""

    def __init__(self, places: AbstractContextManager) -> None:
        self.places, self.held = places, False
        self._lock = threading.Lock()  # the body's close and the call's end may both give it back

    def take(self) -> None:
        self.places.__enter__()
        with self._lock:
            self.held = True

    def give_back(self) -> None:
        with self._lock:
            held, self.held = self.held, False
        if held:
            self.places.__exit__(None, None, None)


_hold: ContextVar[_Hold | None] = ContextVar("taskgen_exchange_hold", default=None)


@contextmanager
def exchanges_limited(places: AbstractContextManager) -> Iterator[None]:
    """Within this block, each HTTP exchange of a provider call made on this thread holds one of `places` (a context
    manager that waits for a free place on enter and frees it on exit) while it is on the wire; a place still held
    when the block ends (an answer whose body was never read) is given back then."""
    hold = _Hold(places)
    token = _hold.set(hold)
    try:
        yield
    finally:
        _hold.reset(token)
        hold.give_back()


def exchange_begins() -> _Hold | None:
    """Called by the transport before it sends a request: waits for a place when the caller limits its calls; the
    hold to give back once the answer is read (None when there is no limit)."""
    hold = _hold.get()
    if hold is not None:
        hold.take()
    return hold


def exchange_ends(hold: _Hold | None) -> None:
    """Called by the transport once the answer's body is read or the exchange failed."""
    if hold is not None:
        hold.give_back()
