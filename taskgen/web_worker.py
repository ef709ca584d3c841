"""A web worker's start, once the app is loaded (taskgen/wsgi.py; bench/review_pages.py sets up its own process the
same way before it times the pages).

Python's garbage collector looks at every object a process holds each time its oldest generation is collected: in a
web worker that is Django's, the app's and every view module's objects, about 100,000, which no request frees. A
run page made that collection every dozen requests or so, 40-120 ms each on this 2-core machine, as long as the rest
of the request: the slow tail of the run table's p95 at a million episodes (issue 26). Frozen once at start
(gc.freeze), those objects are no longer looked at; a collection sees only what requests made since, a tenth of it.
"""
from __future__ import annotations

import gc

from django.urls import get_resolver


def web_worker_settle() -> None:
    """Import every view (the URLconf, which Django loads at the first request otherwise), collect what the start
    left, and freeze every object alive then out of the garbage collector's sight."""
    get_resolver().url_patterns  # noqa: B018 - the attribute imports the URLconf and every view module
    gc.collect()
    gc.freeze()
