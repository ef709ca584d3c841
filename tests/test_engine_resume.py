"""Resume and cancel with a real Celery worker (PostgreSQL, Redis, the fake Gemini on 127.0.0.1): a run started from
the command line, one started from the web page and cancelled half way, and one cancelled while still queued; each
resumes from its own units, however it was started, and ends with every episode judged exactly once.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Count
from django.urls import reverse

from taskgen import celery_app
from taskgen.models import Judgment, PipelineRun, Run, WorkUnit
from taskgen.stages.begin import pipeline_run_cancel
from taskgen.stages.judge.prompt import judge_prompt
from tests.celery_processes import ROOT, kill_group
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import shop_episode
from tests.test_engine_faults import SHORT_LEASES, _wait_for

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
EPISODES = 30


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("several processes writing at once: needs PostgreSQL (DATABASE_URL)")


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def gemini(settings):
    server = FakeGemini(latency=0.3).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    yield server
    server.stop()


@pytest.fixture
def worker(gemini, tmp_path, settings):
    """`start()` starts a worker (judge and default queues: the engine's units and the reconciler) with beat."""
    celery_app.control.purge()  # stray messages from earlier runs must not run against this test's data
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.celery_worker_settings",
           "TASKGEN_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "TASKGEN_MEDIA_ROOT": str(settings.MEDIA_ROOT), "TASKGEN_DATA_ROOT": str(settings.DATA_ROOT),
           "GEMINI_API_KEY": "test-key-not-real", "GOOGLE_GEMINI_BASE_URL": gemini.base_url,
           "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL, **SHORT_LEASES}
    started: list[subprocess.Popen] = []

    def start() -> None:
        name = f"resume-{uuid.uuid4().hex[:6]}"
        log = (tmp_path / f"{name}.log").open("w")
        started.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-B", "-s", str(tmp_path / f"{name}-beat"),
             "-Q", "judge,default", "--pool", "prefork", "--concurrency", "2", "--loglevel", "INFO",
             "--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"{name}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    yield start
    for process in started:
        kill_group(process)
    for log in sorted(tmp_path.glob("*.log")):  # shown when the test fails
        print(f"── {log.name}\n{log.read_text()[-3000:]}")


def _run_to_judge() -> Run:
    run = RunFactory()
    for i in range(EPISODES):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it to the cart")
    return run


def _row(pk: int) -> PipelineRun:
    return PipelineRun.objects.get(pk=pk)


def _judged_once_each(run: Run, pipeline_run_id: int) -> None:
    row = _row(pipeline_run_id)
    assert (row.status, row.done, row.failed) == ("done", EPISODES, 0), \
        list(WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id).exclude(status="done")
             .values_list("key", "status", "last_error")[:5])
    judgments = Judgment.objects.filter(episode__run=run)
    assert judgments.count() == EPISODES
    assert not judgments.values("episode").annotate(n=Count("pk")).filter(n__gt=1).exists()


def _web_params(run: Run) -> dict:
    return {"run": run.pk, "provider": "gemini", "model": "", "prompt_version": judge_prompt().version,
            "image_policy": "default"}


def test_a_run_started_from_the_command_line_is_cancelled_then_resumed_by_the_command_line(worker):
    run = _run_to_judge()
    err = io.StringIO()
    with pytest.raises(SystemExit) as ended:  # no worker yet: the wait stalls and names the units not done
        call_command("taskgen", "judge", str(run.pk), "--provider", "gemini", "--stall-seconds", "2",
                     stdout=io.StringIO(), stderr=err)
    assert ended.value.code == 1 and "stalled" in err.getvalue()
    pipeline_run = PipelineRun.objects.get(stage="judge")
    assert "started_with" not in pipeline_run.params  # started from the command line, not a form
    assert pipeline_run_cancel(pipeline_run=pipeline_run)  # as from the page: its in-flight messages drop it
    worker()
    call_command("taskgen", "resume", str(pipeline_run.pk), "--stall-seconds", "120", stdout=io.StringIO(),
                 stderr=io.StringIO())
    _judged_once_each(run, pipeline_run.pk)


def test_a_run_started_from_the_web_page_cancelled_half_way_resumes_from_the_page(worker, admin_client_role):
    run = _run_to_judge()
    worker()
    response = admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), _web_params(run))
    assert response.status_code == 302, response.content.decode()[:2000]
    pk = PipelineRun.objects.get(stage="judge").pk
    _wait_for(lambda: _row(pk).done >= EPISODES * 0.3, 120, "30% of the run")
    admin_client_role.post(reverse("review:pipeline_cancel", args=[pk]))
    _wait_for(lambda: not WorkUnit.objects.filter(pipeline_run_id=pk, status="running").exists(), 60,
              "the units in hand to finish")
    cancelled = _row(pk)
    assert cancelled.status == "cancelled" and cancelled.done < EPISODES
    assert WorkUnit.objects.filter(pipeline_run_id=pk, status="cancelled").count() == EPISODES - cancelled.done
    time.sleep(2)
    assert _row(pk).done == cancelled.done  # nothing more is judged while it is cancelled
    assert admin_client_role.post(reverse("review:pipeline_resume", args=[pk])).status_code == 302
    _wait_for(lambda: _row(pk).is_finished, 120, "the resumed run to finish")
    _judged_once_each(run, pk)


def test_a_run_cancelled_while_queued_does_nothing_until_resumed(worker, admin_client_role, monkeypatch):
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda *args, **kwargs: False)  # queued: no worker sent
    run = _run_to_judge()
    admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), _web_params(run))
    pk = PipelineRun.objects.get(stage="judge").pk
    admin_client_role.post(reverse("review:pipeline_cancel", args=[pk]))
    assert _row(pk).status == "cancelled"
    assert set(WorkUnit.objects.filter(pipeline_run_id=pk).values_list("status", flat=True)) == {"cancelled"}
    worker()  # its reconciler wakes only running runs
    time.sleep(5)
    assert not Judgment.objects.filter(episode__run=run).exists() and _row(pk).status == "cancelled"
    admin_client_role.post(reverse("review:pipeline_resume", args=[pk]))  # beat's reconciler sends the workers
    _wait_for(lambda: _row(pk).is_finished, 120, "the resumed run to finish")
    _judged_once_each(run, pk)
