"""No command's process loads Django's test tools (django.test: unittest, xml.dom, the test runner) at its start: the
attempt stage's module imports the sandbox's sitemap crawler, which uses django.test's Client, and that import cost
every process that loads the attempt stage (an export, a worker, `taskgen --help`) 36-190 ms of its start. The crawl
still works: it imports the Client when it runs (tests/test_sandbox_tasks.py crawls the sandbox's sites)."""
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
from taskgen.management.commands.taskgen import _subcommands
names = sorted(_subcommands())
tools = sorted(m for m in ("django.test", "unittest") if m in sys.modules)
print(json.dumps({"subcommands": len(names), "test_tools": tools}))
"""


def test_every_subcommand_loads_without_djangos_test_tools():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", SNIPPET], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    loaded = json.loads(out.splitlines()[-1])
    assert loaded["subcommands"] > 10  # every stage's and tool's command module was imported
    assert loaded["test_tools"] == []
