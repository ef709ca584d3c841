"""`taskgen demo-judge`: judge the demo's own runs (the sandbox episodes, the Online-Mind2Web ones) once with the
offline rules baseline, so a new user's review queues (false-positive audit first) and validate page have verdicts
to show. Runs anyone imported are theirs: never judged here. Safe to repeat: a second `make demo` changes nothing."""
from __future__ import annotations

import argparse
import io
import json

from taskgen.cli.demo_attempt import DEMO_RUN
from taskgen.cli.demo_data import OM2W_RUN
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait
from taskgen.models import Judgment, PipelineRun, Run
from taskgen.providers import provider_offline
from taskgen.stages.judge.service import episodes_left_to_judge, judge_config_for, judge_summary
from taskgen.stages.judge.work import JudgeParams

NAME = "demo-judge"
HELP = "Judge the demo's runs once with the rules baseline (offline; a heuristic, not a model)."
DEMO_RUNS = (OM2W_RUN, DEMO_RUN)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, help="threads judging at once")


def run(options: dict, stdout, stderr) -> int:
    config = judge_config_for(provider_offline("judge"))
    runs = list(Run.objects.filter(name__in=DEMO_RUNS).order_by("created_at"))
    if not runs:
        stdout.write("demo judge: no demo runs to judge yet")
        return 0
    for run in runs:
        if reason := judged_before(run):
            stdout.write(f"demo judge: {run.name}: {reason}; left as it is")
            continue
        pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE,
                                 params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key),
                                 send_workers=False)
        errors = run_wait(pipeline_run=pipeline_run, stream=io.StringIO(),
                          work_here=max(1, options["workers"])).pipeline_run.failed
        stdout.write(f"demo judge: {run.name}: {json.dumps(judge_summary(run=run, config=config, errors=errors))}")
    return 0


def judged_before(run: Run) -> str:
    """Why the demo leaves this run's verdicts alone ("" when it has none and was never judged)."""
    earlier = PipelineRun.objects.filter(stage=PipelineRun.Stage.JUDGE, params__run=run.pk).order_by("pk").first()
    if earlier is not None:
        return f"judged before (pipeline run {earlier.pk}, {earlier.status})"
    if Judgment.objects.filter(episode__run=run).exists():
        return "has verdicts already"
    if not episodes_left_to_judge(run=run, config=judge_config_for(provider_offline("judge"))).exists():
        return "no recorded episodes to judge"
    return ""
