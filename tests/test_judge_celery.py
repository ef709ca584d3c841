"""Judging through a real Celery worker process: a run judged twice gets one judgment per episode, and a worker
process killed in the middle of a judge call has its task redelivered and the result stored once.

The broker is settings.CELERY_BROKER_URL: Redis in CI, the embedded filesystem broker on a laptop.
"""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from taskgen.celery import app as celery_app
from taskgen.engine.contract import NothingToDo
from taskgen.engine.control import run_start
from taskgen.models import Judgment, PipelineRun
from taskgen.stages.judge.service import judge_config_for
from taskgen.stages.judge.work import JudgeParams
from tests.factories import RunFactory
from tests.fakes.gemini_server import DEFAULT_ANSWER, FakeGemini
from tests.judge_helpers import shop_episode

ROOT = Path(__file__).resolve().parent.parent
# Short leases and a quick reconciler (Celery beat runs beside the worker, as in `make demo`), so a killed worker's
# episode is back in the queue within seconds.
SHORT_LEASES = {"TASKGEN_ENGINE_LEASE_SECONDS": "4", "TASKGEN_ENGINE_RECONCILE_SECONDS": "1",
                "TASKGEN_ENGINE_WAKE_AGAIN_SECONDS": "2", "TASKGEN_ENGINE_SLICE_SECONDS": "20"}
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def shared_fake() -> FakeGemini:
    server = FakeGemini(latency=0.2).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def worker(shared_fake, django_db_setup, django_db_blocker, tmp_path_factory):
    """One real worker for the module (starting one costs seconds): prefork with one child process, queue `judge`.
    One child, so the kill test knows which process holds the task."""
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    with django_db_blocker.unblock():
        _purge_judge_queue()
        process = _start_worker(shared_fake, log_path, concurrency=1)
    process.log_path = log_path
    beat = start_beat(log_path.parent, worker_env(shared_fake, log_path))
    yield process
    _stop_worker(process)
    _stop_worker(beat)


@pytest.fixture
def fake_gemini(shared_fake, worker, settings):
    """The module's fake server, reset for each test, and this process pointed at it."""
    shared_fake.latency, shared_fake.batch_polls, shared_fake.answer = 0.2, 1, lambda body: DEFAULT_ANSWER
    shared_fake.requests.clear()
    shared_fake.batches.clear()
    shared_fake.polls.clear()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = shared_fake.base_url
    settings.JUDGE_BATCH_POLL_SECONDS = 1
    return shared_fake


def _purge_judge_queue() -> None:
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_declare(queue="judge", durable=True, auto_delete=False)
        conn.default_channel.queue_purge("judge")


def start_beat(folder: Path, env: dict) -> subprocess.Popen:
    """Celery beat, which sends the engine's reconciler on its schedule."""
    command = [sys.executable, "-m", "celery", "-A", "taskgen", "beat", "-s", str(folder / "beat-schedule"),
               "--loglevel", "INFO"]
    log = (folder / "beat.log").open("w")
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def worker_env(fake: FakeGemini, log_path: Path) -> dict:
    media = log_path.parent / "media"  # the worker tests' episodes have no screenshots: nothing is read from here
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.celery_worker_settings",
           "TASKGEN_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "TASKGEN_MEDIA_ROOT": str(media), "GEMINI_API_KEY": "test-key-not-real",
           "GOOGLE_GEMINI_BASE_URL": fake.base_url, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "TASKGEN_JUDGE_RETRY_BASE": "0.05", "TASKGEN_JUDGE_TIMEOUT": "20", "TASKGEN_JUDGE_BATCH_POLL": "1",
           **SHORT_LEASES}


def _start_worker(fake: FakeGemini, log_path: Path, concurrency: int) -> subprocess.Popen:
    env = worker_env(fake, log_path)
    command = [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-Q", "judge,default", "--pool", "prefork",
               "--concurrency", str(concurrency), "--loglevel", "INFO", "--without-heartbeat", "--without-mingle",
               "--without-gossip", "-n", f"judge-test-{uuid.uuid4().hex[:8]}@%h"]
    log = log_path.open("w")
    worker = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    _wait_for(lambda: "ready." in log_path.read_text() or worker.poll() is not None, 60, "worker start", log_path)
    assert worker.poll() is None, log_path.read_text()[-3000:]
    return worker


def _stop_worker(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)


def _wait_for(condition, seconds: float, what: str, log_path: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    tail = log_path.read_text()[-3000:] if log_path and log_path.exists() else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def _judge(run, config) -> PipelineRun:
    return run_start(stage="judge", params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))


def _finished(*pipeline_runs: PipelineRun) -> bool:
    return all(PipelineRun.objects.get(pk=p.pk).is_finished for p in pipeline_runs)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_a_run_judged_twice_gets_one_judgment_per_episode(fake_gemini, worker):
    run = RunFactory()
    episodes = [shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it") for i in range(6)]
    config = judge_config_for("gemini")
    first = _judge(run, config)
    second = _judge(run, config)  # pressed twice: every episode has a unit in both runs
    assert (first.total, second.total) == (6, 6)
    _wait_for(lambda: _finished(first, second), 90, "both passes", worker.log_path)
    assert Judgment.objects.filter(config=config).count() == 6
    assert set(Judgment.objects.values_list("episode_id", flat=True)) == {e.pk for e in episodes}
    assert all(PipelineRun.objects.get(pk=p.pk).done == 6 for p in (first, second))
    with pytest.raises(NothingToDo, match="nothing to judge"):  # a third pass has nothing left: says so, makes no run
        _judge(run, config)
    assert PipelineRun.objects.count() == 2


def test_a_worker_killed_mid_call_is_redelivered_and_stored_once(fake_gemini, worker):
    fake_gemini.latency = 4.0  # long enough to kill the worker process while the call is in flight
    run = RunFactory()
    episode = shop_episode(run=run)
    config = judge_config_for("gemini")
    pipeline_run = _judge(run, config)
    _wait_for(lambda: len(fake_gemini.requests) == 1, 60, "the first judge call", worker.log_path)
    [child] = _children(worker.pid)
    fake_gemini.latency = 0.1
    os.kill(child, signal.SIGKILL)
    _wait_for(lambda: _finished(pipeline_run), 90, "the redelivered task", worker.log_path)
    assert len(fake_gemini.requests) >= 2
    assert list(Judgment.objects.filter(episode=episode).values_list("verdict", flat=True)) == ["SUCCESS"]
    assert PipelineRun.objects.get(pk=pipeline_run.pk).done == 1


def test_the_cli_judges_a_run_through_celery_and_prints_the_summary(fake_gemini, tmp_path):
    run = RunFactory(name="sandbox-gemini")
    for i in range(3):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it")
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "judge", "sandbox-gemini", "--provider", "gemini",
                 "--write-dir", str(tmp_path / "judge"), stdout=out, stderr=err)
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary == {"episodes": 3, "success": 3, "rate": 1.0, "no_verdict": 0, "errors": 0,
                       "judge": "gemini-3.5-flash"}
    assert "judging 3 episodes" in err.getvalue() and "] 3/3 done, 0 failed" in err.getvalue()
    assert len(list((tmp_path / "judge").glob("*.json"))) == 3


def test_the_cli_batch_option_is_a_run_of_units_the_workers_poll_until_collected(fake_gemini):
    fake_gemini.batch_polls = 2
    run = RunFactory(name="sandbox-batch")
    for i in range(2):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it")
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "judge", "sandbox-batch", "--provider", "gemini", "--batch", stdout=out, stderr=err)
    assert json.loads(out.getvalue().strip().splitlines()[-1])["success"] == 2
    assert len(fake_gemini.batches) == 1 and len(fake_gemini.polls) >= 2  # the workers polled it, a unit at a time
    assert set(Judgment.objects.values_list("source", flat=True)) == {"batch"}
    assert "through one Gemini Batch API job" in err.getvalue() and "] 2/2 done, 0 failed" in err.getvalue()
    pipeline_run = PipelineRun.objects.get(run=run)
    assert list(pipeline_run.units.values_list("status", flat=True)) == ["done", "done"]
