"""The per-model rate limit is shared through the database or Redis, so a fleet of workers stays under the quota."""
from __future__ import annotations

import uuid

import pytest

from taskgen.models import JudgeRateWindow
from taskgen.stages.judge import service as judge_stage
from taskgen.stages.judge.rate_limit import rate_limit_acquire

REDIS_TEST_URL = "redis://127.0.0.1:6379/3"


class FakeClock:
    """Time that moves only when the code under test sleeps."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _three_calls(model: str) -> FakeClock:
    clock = FakeClock(start=1_800_000_000.0 + 10)  # 10 s into a minute
    for _ in range(3):
        rate_limit_acquire(model=model, per_minute=2, sleep=clock.sleep, clock=clock)
    return clock


def test_the_database_limit_makes_the_third_call_wait_for_the_next_minute(db, settings):
    settings.REDIS_URL = ""
    clock = _three_calls("gemini-test")
    assert len(clock.slept) == 1 and 50 <= clock.slept[0] <= 50.5
    assert sorted(JudgeRateWindow.objects.values_list("count", flat=True)) == [1, 2]


def test_the_limit_is_per_model(db, settings):
    settings.REDIS_URL = ""
    clock = FakeClock(start=1_800_000_000.0)
    for model in ("model-a", "model-b", "model-a", "model-b"):
        rate_limit_acquire(model=model, per_minute=2, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


def test_the_redis_limit_counts_across_workers(db, settings):
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_TEST_URL).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    settings.REDIS_URL = REDIS_TEST_URL
    clock = _three_calls(f"gemini-test-{uuid.uuid4().hex}")
    assert len(clock.slept) == 1 and not JudgeRateWindow.objects.exists()


def test_backoff_grows_with_jitter_and_honours_the_hint(settings):
    settings.JUDGE_RETRY_BASE_SECONDS, settings.JUDGE_RETRY_MAX_SECONDS = 1.0, 30.0
    delays = [judge_stage.retry_delay(attempt=n) for n in (1, 2, 3, 4)]
    assert all(2 ** (n - 1) / 2 <= d <= 2 ** (n - 1) for n, d in zip((1, 2, 3, 4), delays, strict=True))
    assert judge_stage.retry_delay(attempt=1, hint=12.0) == 12.0
    assert judge_stage.retry_delay(attempt=9) <= 30.0


@pytest.mark.django_db(transaction=True)
def test_workers_opening_a_window_at_once_all_take_a_call(settings):
    """Workers whose first call of a minute arrive together (threads released by a barrier) all fit a limit with
    room for them: none is told to wait for the next minute because another opened the window first."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connection

    from taskgen.stages.judge.rate_limit import rate_limit_take

    settings.REDIS_URL = ""
    width, rounds = 8, 12
    for round_ in range(rounds):
        barrier, model = Barrier(width), f"gemini-open-{round_}-{uuid.uuid4().hex[:8]}"

        def one(_: int, barrier: Barrier = barrier, model: str = model) -> float:
            try:
                barrier.wait(timeout=30)
                return rate_limit_take(model=model, per_minute=1000)
            finally:
                connection.close()

        with ThreadPoolExecutor(width) as pool:
            waits = list(pool.map(one, range(width)))
        assert waits == [0.0] * width, f"round {round_}: {waits}"
        assert JudgeRateWindow.objects.get(key__contains=model).count == width
