"""A killed judge worker, with the engine's default leases and reconciler (no short settings here): its units come
back in well under a minute, and the answers it had received but not recorded are not paid for again.

Real processes: a judge worker as production runs it (threads, 20), a worker of the default queue, Celery beat, a
Redis of our own, PostgreSQL and the fake Gemini. To kill the worker at the worst moment, with answers in hand and
none recorded, the test holds a lock on the judgments table: every thread receives its answer and then waits to
store it; the worker is SIGKILLed there, the lock let go, and another worker started, as a supervisor would.
"""
from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from django.db.models import Count

from taskgen.engine.control import run_start
from taskgen.models import Judgment, PipelineRun, WorkUnit
from taskgen.stages.judge.service import judge_config_for
from taskgen.stages.judge.work import JudgeParams
from tests.celery_processes import CeleryProcesses, celery_env, kill_group
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import shop_episode
from tests.redis_server import RedisServer

EPISODES = 150
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("locks a table and kills workers mid-transaction: needs PostgreSQL (DATABASE_URL)")


@pytest.fixture
def fake_gemini():
    server = FakeGemini(latency=0.3).start()
    yield server
    server.stop()


@pytest.fixture
def processes(fake_gemini, tmp_path, settings, monkeypatch):
    redis_server = RedisServer(None, tmp_path).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = fake_gemini.base_url
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda *args, **kwargs: False)  # beat wakes the run
    started = CeleryProcesses(tmp_path, env=celery_env(fake_base_url=fake_gemini.base_url,
                                                       broker_url=redis_server.url, media_root=tmp_path))
    yield started
    started.stop_all()
    redis_server.kill()


def _wait_for(condition, seconds: float, what: str) -> float:
    """Seconds it took; fails when `condition` is not true within `seconds`."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if condition():
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


class JudgmentsLocked:
    """Holds PostgreSQL's EXCLUSIVE lock on the judgments table from a connection of its own: reads go on, every
    write of a judgment waits."""

    def __enter__(self) -> JudgmentsLocked:
        params = connection.get_connection_params()
        self.conn = psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
        self.conn.execute(f"LOCK TABLE {Judgment._meta.db_table} IN EXCLUSIVE MODE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.rollback()
        self.conn.close()


def _quiet(fake: FakeGemini, seconds: float = 2.0) -> bool:
    """No call in flight and none new for `seconds`: every thread holds an answer it cannot store."""
    count = len(fake.requests)
    time.sleep(seconds)
    return fake.in_flight == 0 and len(fake.requests) == count


def test_a_killed_worker_returns_its_units_within_a_minute_and_pays_no_arrived_answer_twice(processes, fake_gemini):
    run = RunFactory()
    for i in range(EPISODES):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it to the cart")
    config = judge_config_for("gemini")
    pipeline_run = run_start(stage="judge", params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))
    processes.beat()
    processes.worker(queues="default", concurrency=1)  # the reconciler's queue
    worker = processes.worker(queues="judge", pool="threads", concurrency=20)
    settled = WorkUnit.objects.filter(pipeline_run=pipeline_run, status__in=["done", "failed"])
    _wait_for(lambda: settled.count() >= EPISODES * 0.3, 180, "30% of the run")
    with JudgmentsLocked():
        _wait_for(lambda: _quiet(fake_gemini), 60, "every thread to hold an answer it cannot store")
        in_hand = WorkUnit.objects.filter(pipeline_run=pipeline_run, status="running").count()
        kill_group(worker)
        killed_at = time.monotonic()
    processes.worker(queues="judge", pool="threads", concurrency=20)
    try:
        _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 60, "the run to finish")
    finally:
        print(f"{in_hand} units in hand at the kill; the run ended {time.monotonic() - killed_at:.1f} s after it")
    pipeline_run.refresh_from_db()
    assert in_hand > 0
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", EPISODES, 0)
    judgments = Judgment.objects.filter(episode__run=run)
    assert judgments.count() == EPISODES
    assert not judgments.values("episode").annotate(n=Count("pk")).filter(n__gt=1).exists()
    assert set(judgments.values_list("verdict", flat=True)) == {"SUCCESS"}
    assert fake_gemini.paid_twice() == []
    assert all(j.input_tokens > 0 for j in judgments.filter(source="judge"))  # the kept answers' cost is counted
