"""A rate limit per model shared by every worker: at most N calls in each clock minute, counted in Redis when
settings.REDIS_URL is set, else in the database (JudgeRateWindow). A worker over the limit waits for the next minute."""
from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from taskgen.models import JudgeRateWindow


@functools.lru_cache(maxsize=4)
def _redis(url: str):
    import redis

    return redis.Redis.from_url(url)


def _take_redis(key: str, limit: int) -> bool:
    client = _redis(settings.REDIS_URL)
    pipe = client.pipeline()
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    return int(count) <= limit


def _take_database(key: str, limit: int) -> bool:
    if JudgeRateWindow.objects.filter(key=key, count__lt=limit).update(count=F("count") + 1) == 1:
        return True  # the common case: this minute's window exists and has room, one statement
    if JudgeRateWindow.objects.filter(key=key).exists():
        return False
    try:
        with transaction.atomic():
            JudgeRateWindow.objects.create(key=key, count=1)
    except IntegrityError:
        return _take_database(key, limit)  # another worker opened this minute's window first
    # A new minute: drop the windows of minutes long gone, so the table stays a few rows.
    JudgeRateWindow.objects.filter(created_at__lt=timezone.now() - timedelta(minutes=5)).delete()
    return True


def rate_limit_acquire(*, model: str, per_minute: int | None = None, sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.time) -> float:
    """Wait until a call to `model` fits in this minute's quota; returns the seconds waited."""
    limit = per_minute or settings.JUDGE_RPM
    take = _take_redis if settings.REDIS_URL else _take_database
    waited = 0.0
    while True:
        now = clock()
        minute = int(now // 60)
        if take(f"taskgen:judge-rpm:{model}:{minute}", limit):
            return waited
        pause = (minute + 1) * 60 - now + random.uniform(0, 0.5)  # jitter: the fleet does not wake at once
        sleep(pause)
        waited += pause

