"""One retry rule for every model call (judge, agent, proposer) and every provider: which HTTP statuses are worth a
second try (TRANSIENT_STATUSES), and how: transient errors (429, 5xx, timeouts) are tried again with exponential
backoff and jitter, never sooner than the server's hint; others fail at once."""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings

from taskgen.providers.base import ProviderError

log = logging.getLogger(__name__)
T = TypeVar("T")
# Statuses a server sends when it may answer the same request later: a timeout, a conflict with a concurrent
# request (OpenAI's lock timeout, Google's ABORTED), a rate limit, a server error or one that is down or busy.
# Every other 4xx (a bad key, a context too long, a model not served) will be answered the same way again.
TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


def status_transient(status: int | None) -> bool:
    """Whether an HTTP error status is worth trying again (the same for every provider)."""
    return status in TRANSIENT_STATUSES


def retry_delay(*, attempt: int, hint: float | None = None) -> float:
    """Exponential backoff with jitter (half fixed, half random), never sooner than the server's hint."""
    ceiling = min(settings.JUDGE_RETRY_MAX_SECONDS, settings.JUDGE_RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    delay = ceiling / 2 + random.uniform(0, ceiling / 2)
    return max(delay, hint or 0.0)


CALL_TIMEOUTS = 2  # a call waits up to the model timeout for its answer to start, then as long again for the rest


def retries_longest_seconds(*, attempts: int) -> float:
    """The longest `call_with_retries` can take with calls that each run to the model timeout (twice: to the answer's
    first byte, then its body, which an OpenAI-compatible answer is read within): every try, and the longest backoff
    between them (a server's hint may ask for longer)."""
    return (attempts * CALL_TIMEOUTS * settings.JUDGE_TIMEOUT_SECONDS
            + (attempts - 1) * settings.JUDGE_RETRY_MAX_SECONDS)


def call_with_retries(call: Callable[[], T], *, attempts: int, before: Callable[[], None] | None = None,
                      what: str = "model call") -> T:
    """`call()`, tried up to `attempts` times while it raises a transient ProviderError (`before()` runs ahead of
    each try: a rate limiter); the last error, or any permanent one, is raised."""
    for attempt in range(1, attempts + 1):
        if before is not None:
            before()
        try:
            return call()
        except ProviderError as exc:
            if not exc.transient or attempt == attempts:
                raise
            delay = retry_delay(attempt=attempt, hint=exc.retry_after)
            log.info("%s failed (%s); try %d in %.1fs", what, exc, attempt + 1, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises
