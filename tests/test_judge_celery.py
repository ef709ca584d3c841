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
from taskgen.models import Judgment, PipelineRun
from taskgen.stages.judge import judge_config_for, judge_start
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import shop_episode

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_gemini(settings):
    server = FakeGemini(latency=0.2).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    yield server
    server.stop()


def _purge_judge_queue() -> None:
    with celery_app.connection_for_write() as conn:
        conn.default_channel.queue_declare(queue="judge", durable=True, auto_delete=False)
        conn.default_channel.queue_purge("judge")


def _start_worker(fake: FakeGemini, log_path: Path, concurrency: int) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.celery_worker_settings",
           "TASKGEN_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "TASKGEN_MEDIA_ROOT": str(settings.MEDIA_ROOT), "GEMINI_API_KEY": "test-key-not-real",
           "GOOGLE_GEMINI_BASE_URL": fake.base_url, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
           "TASKGEN_JUDGE_RETRY_BASE": "0.05", "TASKGEN_JUDGE_TIMEOUT": "20"}
    command = [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-Q", "judge", "--pool", "prefork",
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


def _finished(*pipeline_runs: PipelineRun) -> bool:
    return all(PipelineRun.objects.get(pk=p.pk).is_finished for p in pipeline_runs)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_a_run_judged_twice_gets_one_judgment_per_episode(fake_gemini, tmp_path):
    run = RunFactory()
    episodes = [shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it") for i in range(6)]
    config = judge_config_for("gemini")
    _purge_judge_queue()
    first = judge_start(run=run, config=config)
    second = judge_start(run=run, config=config)  # pressed twice: every episode is queued twice
    assert (first.total, second.total) == (6, 6)
    worker = _start_worker(fake_gemini, tmp_path / "worker.log", concurrency=2)
    try:
        _wait_for(lambda: _finished(first, second), 90, "both passes", tmp_path / "worker.log")
    finally:
        _stop_worker(worker)
    assert Judgment.objects.filter(config=config).count() == 6
    assert set(Judgment.objects.values_list("episode_id", flat=True)) == {e.pk for e in episodes}
    assert all(PipelineRun.objects.get(pk=p.pk).done == 6 for p in (first, second))
    assert judge_start(run=run, config=config).total == 0  # a third pass has nothing left to judge


def test_a_worker_killed_mid_call_is_redelivered_and_stored_once(fake_gemini, tmp_path):
    fake_gemini.latency = 4.0  # long enough to kill the worker process while the call is in flight
    run = RunFactory()
    episode = shop_episode(run=run)
    config = judge_config_for("gemini")
    _purge_judge_queue()
    pipeline_run = judge_start(run=run, config=config)
    worker = _start_worker(fake_gemini, tmp_path / "worker.log", concurrency=1)
    try:
        _wait_for(lambda: len(fake_gemini.requests) == 1, 60, "the first judge call", tmp_path / "worker.log")
        [child] = _children(worker.pid)
        fake_gemini.latency = 0.1
        os.kill(child, signal.SIGKILL)
        _wait_for(lambda: _finished(pipeline_run), 90, "the redelivered task", tmp_path / "worker.log")
    finally:
        _stop_worker(worker)
    assert len(fake_gemini.requests) >= 2
    assert list(Judgment.objects.filter(episode=episode).values_list("verdict", flat=True)) == ["SUCCESS"]
    assert PipelineRun.objects.get(pk=pipeline_run.pk).done == 1


def test_the_cli_judges_a_run_through_celery_and_prints_the_summary(fake_gemini, tmp_path):
    run = RunFactory(name="sandbox-gemini")
    for i in range(3):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it")
    _purge_judge_queue()
    worker = _start_worker(fake_gemini, tmp_path / "worker.log", concurrency=2)
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("taskgen", "judge", "sandbox-gemini", "--provider", "gemini",
                     "--write-dir", str(tmp_path / "judge"), stdout=out, stderr=err)
    finally:
        _stop_worker(worker)
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary == {"episodes": 3, "success": 3, "rate": 1.0, "no_verdict": 0, "errors": 0,
                       "judge": "gemini-3.5-flash"}
    assert "queued 3 episodes" in err.getvalue() and "judged 3/3" in err.getvalue()
    assert len(list((tmp_path / "judge").glob("*.json"))) == 3
