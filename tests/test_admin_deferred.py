"""The admin's modules (taskgen/admin.py, review/admin.py) are imported when the admin is used, not at every process's
start: the URL conf discovers them (taskgen/urls.py), and so does `manage.py check` before the admin's checks, so a
broken ModelAdmin is still reported by a check that runs on its own, before any URL conf was loaded."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADMIN_MODULES = ("taskgen.admin", "review.admin", "django.contrib.auth.admin")

SNIPPET = """
import json, sys
import django
django.setup()
from django.contrib import admin
from django.core.management import call_command
loaded = lambda: sorted(name for name in %r if name in sys.modules)
print(json.dumps({"at_start": loaded(), "registered": len(admin.site._registry)}))
%s
print(json.dumps({"after": loaded(), "registered": len(admin.site._registry)}))
"""


def _run(then: str) -> list[dict]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", SNIPPET % (ADMIN_MODULES, then)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_process_starts_without_the_admins_modules():
    start, _ = _run("pass")
    assert start == {"at_start": [], "registered": 0}


def test_the_admins_checks_run_on_its_modules_without_the_url_conf():
    _, after = _run("call_command('check', tags=['admin'])")
    assert after["after"] == sorted(ADMIN_MODULES)
    assert after["registered"] > 0


def test_the_url_conf_discovers_the_admins_modules():
    _, after = _run("from django.urls import reverse; reverse('admin:index')")
    assert after["after"] == sorted(ADMIN_MODULES)
