"""Python's garbage collector while a process starts (imported before Django: nothing of Django's here).

A start (Django's setup and the app's modules, a provider's SDK) makes about a million objects that live as long as
the process, and next to no garbage; the collector would walk them over and over as they are made, and again at
every full collection after. Measured on `taskgen judge RUN --workers 16`: 60-80 ms of its ~0.7 s before the first
model call, paid by every process that joins a run.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def start_uncollected() -> Iterator[None]:
    """No collection while the block loads what the process keeps; then what it made is frozen out of later
    collections' walks (gc.freeze: only cyclic garbage among it would stay, until the process ends)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
