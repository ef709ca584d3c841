"""The Celery app is loaded where it is used, not at every process's start (85 ms of each command's), and a message
sent from a process that had not loaded it still goes through it: to the configured broker, never to Celery's default
app (amqp on localhost)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SNIPPET = """
import json, sys
import django
django.setup()
from django.conf import settings
started = sorted(name for name in ("celery.app", "kombu.messaging", "taskgen.celery") if name in sys.modules)
from taskgen.engine import send
print(json.dumps({"at_start": started, "configured": settings.CELERY_BROKER_URL}))
send._celery_app()
from taskgen.engine.tasks import work_task
print(json.dumps({"task_app": work_task.app.main, "broker": work_task.app.conf.broker_url}))
"""


def _run(snippet: str) -> list[dict]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_process_starts_without_celery_and_sends_through_the_apps_broker():
    start, bound = _run(SNIPPET)
    assert start["at_start"] == []  # Django set up, the engine importable: no Celery yet
    assert bound == {"task_app": "taskgen", "broker": start["configured"]}


def test_the_app_is_still_reachable_as_taskgen_celery_app():
    from taskgen import celery_app
    from taskgen.celery import app

    assert celery_app is app


def test_dispatch_loads_the_app_before_it_sends(db, monkeypatch):
    from taskgen.engine import send
    from taskgen.engine.contract import StageParams, StageWork
    from taskgen.engine.stage_table import ENGINE_STAGES
    from taskgen.models import PipelineRun

    order = []
    monkeypatch.setattr(send, "_celery_app", lambda: order.append("app loaded"))
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda *args, **kw: order.append("sent"))
    monkeypatch.setitem(ENGINE_STAGES, "send-test", StageWork(
        name="send-test", check=StageParams.from_json, read=StageParams.from_json, units=lambda params: ["a"],
        do=lambda *args: "", finish=lambda *args: {}))
    pipeline_run = PipelineRun.objects.create(stage="send-test", params={}, status="running", total=1)
    assert send.dispatch(pipeline_run.pk, 2)
    assert order == ["app loaded", "sent", "sent"]
