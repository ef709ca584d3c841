"""Faults with real processes: Celery workers and beat in their own process groups, a Redis of our own without
persistence (killed and restarted), PostgreSQL, and the fake Gemini on 127.0.0.1 answering 429/503 one time in five.

A judge run of 300 episodes must finish by itself, one judgment per episode, none lost, none failed, whatever is
killed at 40%. Short leases (4 s) and a reconciler every second keep each test within a minute or two.
"""
from __future__ import annotations

import random
import time

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

EPISODES = 300
SHORT_LEASES = {"TASKGEN_ENGINE_LEASE_SECONDS": "4", "TASKGEN_ENGINE_RECONCILE_SECONDS": "1",
                "TASKGEN_ENGINE_WAKE_AGAIN_SECONDS": "2", "TASKGEN_ENGINE_SLICE_SECONDS": "10"}
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("kills workers mid-transaction with several processes writing: needs PostgreSQL (DATABASE_URL)")


@pytest.fixture
def fake_gemini():
    server = FakeGemini(latency=0.05, retry_hint=0.2).start()
    server.faults_per_request = 3  # an episode's five tries never all fault: the test is of kills, not of bad luck
    rng = random.Random(11)
    server.script([rng.choice(["429", "503"]) if rng.random() < 0.2 else "ok" for _ in range(EPISODES * 2)])
    yield server
    server.stop()


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(None, tmp_path).start()
    yield server
    server.kill()


@pytest.fixture
def services(fake_gemini, redis_server, tmp_path, settings, monkeypatch):
    """Start workers and beat on demand; every process is killed at the end."""
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = fake_gemini.base_url
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda *args, **kwargs: False)  # beat wakes the run
    processes = CeleryProcesses(tmp_path, env=celery_env(fake_base_url=fake_gemini.base_url,
                                                         broker_url=redis_server.url, media_root=tmp_path,
                                                         **SHORT_LEASES))
    yield lambda kind: processes.beat() if kind == "beat" else processes.worker()
    processes.stop_all()


def _print_why_not_finished(pipeline_run: PipelineRun) -> None:
    """What a run that did not finish was waiting for: its row, its units by state, the open ones' last errors."""
    pipeline_run.refresh_from_db()
    print(f"run {pipeline_run.pk}: {pipeline_run.status} done={pipeline_run.done} failed={pipeline_run.failed}")
    units = WorkUnit.objects.filter(pipeline_run=pipeline_run)
    print(sorted(units.values_list("status").annotate(n=Count("pk"))))
    for row in units.exclude(status__in=["done", "failed"]).values_list("key", "status", "attempts", "lease_owner",
                                                                          "lease_until", "last_error")[:20]:
        print(row)


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _judge_run_of(episodes: int) -> PipelineRun:
    run = RunFactory()
    for i in range(episodes):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it to the cart")
    config = judge_config_for("gemini")
    return run_start(stage="judge", params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))


def _settled(pipeline_run: PipelineRun) -> int:
    return WorkUnit.objects.filter(pipeline_run=pipeline_run, status__in=["done", "failed"]).count()


def _assert_every_episode_judged_once(pipeline_run: PipelineRun, fake: FakeGemini) -> None:
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", EPISODES, 0), \
        list(WorkUnit.objects.exclude(status="done").values_list("key", "status", "last_error")[:10])
    judgments = Judgment.objects.filter(episode__run=pipeline_run.run)
    assert judgments.count() == EPISODES
    assert not judgments.values("episode").annotate(n=Count("pk")).filter(n__gt=1).exists()
    assert set(judgments.values_list("verdict", flat=True)) == {"SUCCESS"}
    paid = judgments.filter(source="judge")
    assert paid.count() + judgments.filter(source="cache").count() == EPISODES
    assert all(j.input_tokens > 0 and j.cost_usd > 0 for j in paid)  # every paid call is counted on its judgment
    assert len(fake.requests) >= paid.count()
    assert pipeline_run.result["episodes"] == EPISODES and pipeline_run.result["errors"] == 0


def test_a_worker_killed_with_its_children_at_40_percent_the_run_finishes_by_itself(services, fake_gemini):
    pipeline_run = _judge_run_of(EPISODES)
    services("beat")
    worker = services("worker")
    _wait_for(lambda: _settled(pipeline_run) >= EPISODES * 0.4, 240, "40% of the run")
    kill_group(worker)
    in_flight = WorkUnit.objects.filter(pipeline_run=pipeline_run, status="running").count()
    services("worker")
    try:
        _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 240, "the run to finish")
    except AssertionError:
        _print_why_not_finished(pipeline_run)
        raise
    assert in_flight >= 0
    _assert_every_episode_judged_once(pipeline_run, fake_gemini)


@pytest.mark.parametrize("down_seconds", [0, 10], ids=["restarted", "ten-second-outage"])
def test_redis_without_persistence_killed_at_40_percent_loses_nothing(services, fake_gemini, redis_server,
                                                                      down_seconds):
    pipeline_run = _judge_run_of(EPISODES)
    services("beat")
    services("worker")
    _wait_for(lambda: _settled(pipeline_run) >= EPISODES * 0.4, 240, "40% of the run")
    redis_server.kill()  # every queued message and the rate limit's counters are gone
    time.sleep(down_seconds)
    redis_server.start()
    _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 300, "the run to finish")
    _assert_every_episode_judged_once(pipeline_run, fake_gemini)
