"""Judge workers as production runs them (`-P threads`, TASKGEN_JUDGE_CONCURRENCY): one process keeps many model
calls in flight, and two worker processes share one rate limit without going over it (the fake Gemini counts the
calls it receives in each window)."""
from __future__ import annotations

import math
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from taskgen.concurrency import judge_threads_for
from taskgen.models import Judgment, PipelineRun
from taskgen.stages.judge.service import judge_config_for
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import shop_episode
from tests.test_judge_celery import _judge, _purge_judge_queue, _stop_worker, _wait_for, worker_env

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
# Bound on the time from taking a rate-limit slot to the call reaching the server: generous, as a thread of a loaded
# 2-core machine can wait hundreds of milliseconds for a core between the two.
DELIVERY = 1.0


@pytest.fixture
def fake(settings):
    server = FakeGemini(latency=0.1).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    yield server
    server.stop()


@pytest.fixture
def judge_workers(fake, tmp_path):
    """Start `count` threads-pool judge workers with extra environment; all stopped at the end."""
    started: list[subprocess.Popen] = []

    def start(count: int, **env: str) -> list[subprocess.Popen]:
        _purge_judge_queue()
        for n in range(count):
            log_path = tmp_path / f"judge-worker-{n}.log"
            environ = {**worker_env(fake, log_path), **env}
            command = [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-Q", "judge", "-P", "threads",
                       "--concurrency", str(judge_threads_for(int(environ.get("TASKGEN_JUDGE_CONCURRENCY", "16")))),
                       "--loglevel", "INFO",
                       "--without-heartbeat", "--without-mingle", "--without-gossip",
                       "-n", f"judge-{n}-{uuid.uuid4().hex[:6]}@%h"]
            process = subprocess.Popen(command, cwd=ROOT, env=environ, stdout=log_path.open("w"),
                                       stderr=subprocess.STDOUT)
            process.log_path = log_path
            started.append(process)
        for process in started:
            _wait_for(lambda p=process: "ready." in p.log_path.read_text() or p.poll() is not None, 90,
                      "worker start", process.log_path)
            assert process.poll() is None, process.log_path.read_text()[-3000:]
        return started

    yield start
    for process in started:
        _stop_worker(process)


def _episodes(count: int):
    run = RunFactory()
    for i in range(count):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it to the cart")
    return run


def test_one_threads_worker_keeps_its_concurrency_in_flight(fake, judge_workers):
    fake.latency = 1.5
    judge_workers(1, TASKGEN_JUDGE_CONCURRENCY="8")
    run = _episodes(16)
    config = judge_config_for("gemini", f"gemini-flight-{uuid.uuid4().hex[:6]}")
    pipeline_run = _judge(run, config)
    _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 180, "the judge run")
    assert Judgment.objects.filter(config=config, verdict="SUCCESS").count() == 16
    assert 6 <= fake.peak_in_flight <= 8  # 8 calls in flight of its 10 threads (6 on a busy machine), never more


def _over_the_limit(arrivals: list[float], window: float, limit: int) -> list[int]:
    """Windows that received more than `limit` calls. A call arriving within DELIVERY of a window's start may have
    taken its slot in the window before: it counts there when that window has room."""
    counts: dict[int, int] = {}
    for at in sorted(arrivals):
        index = int(at // window)
        late = at - index * window < DELIVERY
        if late and counts.get(index - 1, 0) < limit:
            index -= 1
        counts[index] = counts.get(index, 0) + 1
    return [index for index, count in counts.items() if count > limit]


def test_two_judge_workers_share_the_rate_limit_and_never_go_over_it(fake, judge_workers):
    window, per_minute, episodes = 4, 45, 12  # 3 calls a window of 4 s
    limit = per_minute * window // 60
    judge_workers(2, TASKGEN_JUDGE_CONCURRENCY="4", TASKGEN_JUDGE_RPM=str(per_minute),
                  TASKGEN_JUDGE_RATE_WINDOW=str(window))
    run = _episodes(episodes)
    config = judge_config_for("gemini", f"gemini-rpm-{uuid.uuid4().hex[:6]}")
    pipeline_run = _judge(run, config)
    _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 240, "the rate-limited run")
    assert Judgment.objects.filter(config=config, verdict="SUCCESS").count() == episodes
    arrivals = [r["at"] for r in fake.requests]
    assert len(arrivals) == episodes  # a full window re-queues the episode: it is never sent and refused
    assert _over_the_limit(arrivals, window, limit) == [], sorted(arrivals)
    # Held back: the calls need ceil(12 / 3) = 4 windows, and the first may have begun a window before the first call.
    assert max(arrivals) - min(arrivals) >= (math.ceil(episodes / limit) - 2) * window - DELIVERY
