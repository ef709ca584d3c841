"""`taskgen demo-judge`: judge every run's unjudged episodes with the offline rules baseline, so a new user's
review queues (false-positive audit first) and validate page have verdicts to show. Safe to repeat."""
from __future__ import annotations

import argparse
import json

from taskgen.models import Run
from taskgen.stages.judge.service import episodes_to_judge, judge_config_for, judge_run_here, judge_summary

NAME = "demo-judge"
HELP = "Judge every run's unjudged episodes with the rules baseline (offline; a heuristic, not a model)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, help="threads judging at once")


def run(options: dict, stdout, stderr) -> int:
    config = judge_config_for("rules")
    runs = list(Run.objects.order_by("created_at"))
    if not runs:
        stdout.write("demo judge: no runs to judge yet")
        return 0
    for run in runs:
        errors = 0
        if episodes_to_judge(run=run, config=config):  # a second `make demo` adds no empty judge runs
            errors = judge_run_here(run=run, config=config, workers=options["workers"]).failed
        summary = judge_summary(run=run, config=config, errors=errors)
        stdout.write(f"demo judge: {run.name}: {json.dumps(summary)}")
    return 0
