"""Cancel and resume of a background export through a real Celery worker process.

The worker blocks on one row image (its blob file is a named pipe) so the test can cancel while that episode is being
written: the episode being written finishes, nothing after it is, and a resume writes only the rest.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

from taskgen import celery_app
from taskgen.blobs import blob_path
from taskgen.models import Export, JudgeConfig, PipelineRun, Screenshot
from taskgen.stages.begin import pipeline_run_cancel, pipeline_run_resume, stage_start
from tests.factories import UserFactory
from tests.runfiles import load_run_dir, write_run_dir
from tests.test_rows_export import HAND_TASKS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Users made for these tests log in by session; hashing their passwords slowly buys nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker(settings, tmp_path):
    """A real `celery -A taskgen worker` on the test database, media and data folders; stopped after the test."""
    celery_app.control.purge()  # stray messages from earlier runs must not run against this test's data
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "taskgen.settings", "DATABASE_URL": _database_url(),
           "TASKGEN_MEDIA_ROOT": str(settings.MEDIA_ROOT), "TASKGEN_DATA_ROOT": str(settings.DATA_ROOT),
           "TASKGEN_VAR_DIR": str(django_settings.VAR_DIR), "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL,
           # one episode leased and in flight at a time, so the test knows exactly where cancel lands
           "TASKGEN_EXPORT_WORKERS": "1", "TASKGEN_EXPORT_BATCH": "1"}
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-Q", "default", "--pool", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    yield process
    process.send_signal(signal.SIGQUIT)  # cold shutdown: no task is running by now, and a warm one takes seconds
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()
    print((tmp_path / "worker.log").read_text()[-4000:])


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def reloaded(pipeline_run: PipelineRun) -> PipelineRun:
    pipeline_run.refresh_from_db()
    return pipeline_run


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_cancel_stops_after_the_current_episode_and_resume_writes_only_the_rest(settings, worker):
    data = Path(settings.DATA_ROOT)
    run = load_run_dir(*write_run_dir(data / "hand", HAND_TASKS))
    admin = UserFactory(role="admin")
    params = {"run": run.pk, "source": "judge", "judge_config": JudgeConfig.objects.get().pk, "budget": 1000}

    dropped = stage_start(stage="export", params={**params, "out_dir": "dropped"}, user=admin)
    assert pipeline_run_cancel(pipeline_run=dropped)  # cancelled while queued: the worker must drop it

    # Export order: alpha-1, gamma-1, beta-2, ...; beta-2's image blocks until the test writes it.
    shot = Screenshot.objects.get(episode__task__task_id="tg-beta-2")
    pipe, image = blob_path(shot.blob), blob_path(shot.blob).read_bytes()
    pipe.unlink()
    os.mkfifo(pipe)
    export = stage_start(stage="export", params={**params, "out_dir": "rows"}, user=admin)
    wait_for(lambda: reloaded(export).done == 2 and export.total == 8, "two episodes written")
    assert pipeline_run_cancel(pipeline_run=export)
    with pipe.open("wb") as writer:  # unblocks the episode being written
        writer.write(image)
    wait_for(lambda: reloaded(export).done == 3, "the running episode to finish")

    out = data / "rows"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "tg-alpha-1", "tg-beta-2", "tg-gamma-1"]
    assert reloaded(export).status == "cancelled" and Export.objects.count() == 0
    assert reloaded(dropped).status == "cancelled" and not (data / "dropped").exists()

    pipe.unlink()
    pipe.write_bytes(image)
    first_written = (out / "tg-alpha-1").stat().st_ino
    pipeline_run_resume(pipeline_run=export, user=admin)
    wait_for(lambda: reloaded(export).status == "done", "the resumed export to finish")
    assert export.done == 8 and export.failed == 0
    assert (out / "tg-alpha-1").stat().st_ino == first_written  # not written again
    assert (out / "_report.json").exists()
    assert Export.objects.get().pk == export.result["export_id"]
