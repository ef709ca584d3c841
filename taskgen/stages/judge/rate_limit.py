"""A rate limit per model shared by every worker: at most N calls in each clock minute, counted in Redis when
settings.REDIS_URL is set, else in the database (JudgeRateWindow). A worker over the limit waits for the next minute."""
from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from taskgen.engine.contract import RetryLater
from taskgen.models import JudgeRateWindow

if TYPE_CHECKING:
    import redis


@functools.lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis:
    # Imported at the first call counted in Redis: every process registers the judge stage (this module with it),
    # and the redis client's import was 5 MB of a `taskgen rows` process that never counts a call.
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)


def _take_redis(key: str, limit: int) -> bool:
    from redis.exceptions import RedisError

    client = _redis(settings.REDIS_URL)
    pipe = client.pipeline()
    pipe.incr(key)
    pipe.expire(key, max(120, 2 * settings.JUDGE_RATE_WINDOW_SECONDS))
    try:
        count, _ = pipe.execute()
    except RedisError as exc:  # a Redis that cannot be reached is an OSError like any other connection's
        raise ConnectionError(str(exc)) from exc
    return int(count) <= limit


def _take_database(key: str, limit: int) -> bool:
    if _count_one(key, limit):
        return True  # the common case: this minute's window exists and has room, one statement
    try:
        with transaction.atomic():
            JudgeRateWindow.objects.create(key=key, count=1)
    except IntegrityError:
        # The window exists: full, or opened by another worker since the update above. Asking "does it exist?"
        # and answering "full" sent that worker's call to the next minute (a judge run's last episode waited up to a
        # minute when several workers opened a window at once); the row is there now, so count on it once more.
        return _count_one(key, limit)
    # A new minute: drop the windows of minutes long gone, so the table stays a few rows.
    JudgeRateWindow.objects.filter(created_at__lt=timezone.now() - timedelta(minutes=5)).delete()
    return True


COUNT_ONE_SQL = "UPDATE {table} SET {count} = {count} + 1 WHERE {key} = %s AND {count} < %s"


def _count_one(key: str, limit: int) -> bool:
    """Count one call in the window `key` if it exists and has room: one plain statement (the ORM's update with an
    F expression took 0.3 ms of CPU a call, this 0.09)."""
    quote = connection.ops.quote_name
    sql = COUNT_ONE_SQL.format(table=quote(JudgeRateWindow._meta.db_table), count=quote("count"), key=quote("key"))
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, limit])
        return cursor.rowcount == 1


def rate_limit_acquire(*, model: str, per_minute: int | None = None, sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.time) -> float:
    """Wait until a call to `model` fits in this minute's quota; returns the seconds waited."""
    seconds, limit = _window(per_minute)
    take = _take_redis if settings.REDIS_URL else _take_database
    waited = 0.0
    while True:
        now = clock()
        window = int(now // seconds)
        if take(f"taskgen:judge-rpm:{model}:{window}", limit):
            return waited
        pause = (window + 1) * seconds - now + random.uniform(0, 0.5)  # jitter: the fleet does not wake at once
        sleep(pause)
        waited += pause



def rate_limit_take(*, model: str, per_minute: int | None = None, clock: Callable[[], float] = time.time) -> float:
    """Take one call of `model` from this minute's quota: 0 when taken, else the seconds until the next minute.
    A rate-limit store that cannot be reached (a Redis blip) raises RetryLater: it is never the episode's fault."""
    seconds, limit = _window(per_minute)
    take = _take_redis if settings.REDIS_URL else _take_database
    now = clock()
    window = int(now // seconds)
    try:
        taken = take(f"taskgen:judge-rpm:{model}:{window}", limit)
    except OSError as exc:
        raise RetryLater(2 + random.uniform(0, 2), f"rate limiter unreachable: {exc}") from exc
    return 0.0 if taken else (window + 1) * seconds - now + random.uniform(0, 0.5)


def _window(per_minute: int | None) -> tuple[int, int]:
    """(seconds of a window, calls allowed in it): settings.JUDGE_RATE_WINDOW_SECONDS (a minute unless set) and the
    per-minute limit scaled to it."""
    seconds = settings.JUDGE_RATE_WINDOW_SECONDS
    return seconds, max(1, round((per_minute or settings.JUDGE_RPM) * seconds / 60))
