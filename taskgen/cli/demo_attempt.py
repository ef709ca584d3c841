"""`taskgen demo-attempt`: on first start, run about 30 sandbox episodes so a new user sees real episodes."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from django.conf import settings

from sandbox.catalog import sandbox_tasks
from taskgen.models import PipelineRun, Run
from taskgen.stages.attempt import command as attempt_cli

NAME = "demo-attempt"
HELP = "Run ~30 sandbox tasks (all sites) with the scripted agent (a simulation) once, as the run 'sandbox-demo'."
DEMO_RUN = "sandbox-demo"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--inline", action="store_true", help="run the episodes here, one by one, without Celery")


def demo_tasks() -> list[dict]:
    """The demo's tasks: every other sandbox task, so all three sites and both kinds show."""
    return sandbox_tasks()[::2]


def run(options: dict, stdout, stderr) -> int:
    started = PipelineRun.objects.filter(stage=PipelineRun.Stage.ATTEMPT, params__name=DEMO_RUN).exists()
    if Run.objects.filter(name=DEMO_RUN).exists() or started:
        stdout.write(f"demo attempt: run {DEMO_RUN!r} already exists")
        return 0
    chromium = settings.HARNESS_CHROMIUM
    if not (Path(chromium).exists() or shutil.which(chromium)):
        stdout.write(f"demo attempt: no Chromium at {chromium}; skipped (run `make chromium`, then this again)")
        return 0
    tasks_file = Path(settings.DATA_ROOT) / "sandbox-demo-tasks.jsonl"
    tasks_file.parent.mkdir(parents=True, exist_ok=True)
    demo = demo_tasks()
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in demo), encoding="utf-8")
    stdout.write(f"demo attempt: {len(demo)} sandbox episodes in Chromium with the scripted agent (a simulation; "
                 "about a minute)...")
    attempt = {"tasks": tasks_file, "agent": "scripted", "name": DEMO_RUN, "mistakes": 0.3, "seed": 0, "limit": None,
               "workers": options["workers"], "inline": bool(options.get("inline"))}
    return attempt_cli.run(attempt, _Summary(stdout), stderr)


class _Summary:
    """The attempt's output without its per-episode progress lines: `make demo` set-up stays a few lines."""

    def __init__(self, out) -> None:
        self.out = out

    def write(self, text: str) -> None:
        if not text.startswith(("  ", "[")):  # per-episode lines and the progress bar
            self.out.write(f"demo attempt: {text}")

    def flush(self) -> None:
        self.out.flush()
