"""The chaos soak's 2-minute mode (bench/chaos.py --minutes 2), run as a test: a SOAK, minutes of real processes
(gunicorn, Celery workers of every queue, beat, Chromium, a Redis of its own, the fake Gemini) under a seeded
schedule of every fault, on a PostgreSQL database of its own (`<test database>_chaos`, made afresh). It passes when
the soak's own checks pass: every label post answered 2xx stored with its history, no episode judged twice under one
config, no judge call paid twice for an answer the app had received, every run finished or saying why, every fault
held. Select or leave it out with `-m soak` / `-m "not soak"`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.soak, pytest.mark.browser, pytest.mark.celery_worker]


def test_two_minutes_of_faults_lose_nothing_and_double_nothing(tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("the soak runs on PostgreSQL and Redis (DATABASE_URL)")
    if not shutil.which("redis-server"):
        pytest.skip("the soak starts a redis-server of its own")
    if not (os.path.exists(settings.HARNESS_CHROMIUM) or shutil.which(settings.HARNESS_CHROMIUM)):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail("Chromium not found and TASKGEN_REQUIRE_BROWSER is set")
        pytest.skip("Chromium not found")
    parts = urlsplit(os.environ["DATABASE_URL"])
    database = urlunsplit(parts._replace(path=f"/{parts.path.lstrip('/')}_chaos"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TASKGEN_", "CELERY_", "REDIS_"))}
    env["DATABASE_URL"] = database
    command = [sys.executable, "bench/chaos.py", "--minutes", "2", "--drain", "300", "--folder", str(tmp_path),
               "--redis-port", str(free_port()), "--web-port", str(free_port())]
    soak = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = soak.communicate(timeout=1500)
    except subprocess.TimeoutExpired:
        soak.terminate()  # the soak stops every process it started on SIGTERM
        out, err = soak.communicate(timeout=120)
    report = "\n".join(line for line in out.splitlines() if not line.startswith("{"))
    print(report, err[-3000:], sep="\n")
    assert soak.returncode == 0, report
    assert "check: every run finished or says why: passed" in report
