"""`attempt` on the engine through a real Celery worker process: two episodes at once, each with only its own
evidence; progress from the units."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_start
from taskgen.models import PipelineRun, Run

pytestmark = [pytest.mark.celery_worker, pytest.mark.browser, pytest.mark.django_db(transaction=True)]
TASK_IDS = ["sb-shop-013", "sb-mail-016", "sb-booking-013", "sb-shop-018"]


def _database_url() -> str:
    """The test database, for the worker process (which cannot share an in-memory SQLite database)."""
    s = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    if connection.vendor == "sqlite" and not connection.is_in_memory_db():
        return f"sqlite:///{s['NAME']}"
    pytest.skip("a worker process needs a database it can open (PostgreSQL, as in CI); the test DB is in memory")


def _worker(tmp_path: Path, db_url: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": db_url, "TASKGEN_DATA_ROOT": str(settings.DATA_ROOT),
           "TASKGEN_MEDIA_ROOT": str(settings.MEDIA_ROOT)}
    cmd = [sys.executable, "-m", "celery", "-A", "taskgen", "--quiet", "worker", "-Q", "browser", "--concurrency", "2",
           "--pool", "prefork", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
           "-n", f"test-attempt-{os.getpid()}@%h"]
    return subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=(tmp_path / "worker.log").open("w"),
                            stderr=subprocess.STDOUT)


def _wait_done(pipeline_run_id: int, worker: subprocess.Popen, log: Path, timeout: float = 150) -> PipelineRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = PipelineRun.objects.get(pk=pipeline_run_id)
        if row.is_finished:
            return row
        assert worker.poll() is None, f"the worker died:\n{log.read_text()}"
        time.sleep(0.5)
    raise AssertionError(f"attempt not finished in {timeout}s: {row.done}/{row.total}\n{log.read_text()[-3000:]}")


def test_attempt_runs_each_episode_as_a_celery_task_and_imports_the_run(tmp_path):
    if not (os.path.exists(settings.HARNESS_CHROMIUM) or shutil.which(settings.HARNESS_CHROMIUM)):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail("Chromium not found and TASKGEN_REQUIRE_BROWSER is set")
        pytest.skip("Chromium not found")
    db_url = _database_url()
    tasks = [t for t in sandbox_tasks() if t["task_id"] in TASK_IDS]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    worker = _worker(tmp_path, db_url)
    try:
        pipeline_run = run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": "scripted",
                                                          "name": "celery-run", "mistakes": 0.0})
        row = _wait_done(pipeline_run.pk, worker, tmp_path / "worker.log")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert (row.status, row.done, row.failed) == (PipelineRun.Status.DONE, 4, 0), row.errors
    assert sorted(row.units.values_list("key", "status")) == sorted((t, "done") for t in TASK_IDS)
    run = Run.objects.get(name="celery-run")
    assert row.result["verifier_pass"] == 4 and run.episodes.count() == 4
    for episode in run.episodes.select_related("task", "site"):
        # parallel episodes ran against their own sessions: each log and change list is its own site's alone
        assert episode.request_log and episode.data_changes
        assert all(e["path"].startswith(f"/sites/{episode.site.slug}/") for e in episode.request_log)
        assert {c["site"] for c in episode.data_changes} == {episode.site.slug}
    shops = run.episodes.filter(site__slug="shop")
    paths = [{e["path"] for e in ep.request_log if "product" in e["path"]} for ep in shops]
    assert paths[0].isdisjoint(paths[1])  # two shop episodes, different products, no shared requests
