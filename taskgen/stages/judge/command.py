"""`taskgen judge RUN`: judge a run's episodes that have no verdict yet, show progress, print the summary JSON.

The rules provider (offline) judges in this process; gemini queues the run's units on the `judge` queue and waits for
the workers, unless --workers N asks for N threads here instead; --batch sends them as one Gemini Batch API job the
workers poll.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from taskgen.engine.contract import NothingToDo
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait, wait_report, where_words
from taskgen.models import Judgment, PipelineRun, Run
from taskgen.names import PLAIN_NAME_RULE, is_plain_name
from taskgen.providers import provider_can, provider_names
from taskgen.stages.judge.images import POLICIES
from taskgen.stages.judge.prompt import PromptFileError
from taskgen.stages.judge.service import (
    JudgeError,
    episodes_left_to_judge,
    judge_config_for,
    judge_request_build,
    judge_summary,
    judgment_reference_record,
)
from taskgen.stages.judge.work import judge_threads_here
from taskgen.stages.lookup import run_find

NAME = "judge"
HELP = "Judge a run's episodes (only those without a verdict yet) and print the reference's summary JSON."
STALL_SECONDS = 600
BATCH_STALL_SECONDS = 25 * 3600  # Gemini answers a batch job within a day


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="the run's name (as on the runs page) or its id")
    parser.add_argument("--provider", choices=provider_names("judge"), default=None,
                        help="a provider that judges (default: settings.JUDGE_PROVIDER; rules without GEMINI_API_KEY)")
    parser.add_argument("--model", default=None, help="model name (default: settings.JUDGE_MODEL)")
    parser.add_argument("--images", choices=sorted(POLICIES), default=None,
                        help="image policy (default: settings.JUDGE_IMAGE_POLICY, medium)")
    parser.add_argument("--workers", type=int, default=0,
                        help="judge here with N calls in flight instead of queueing Celery tasks")
    parser.add_argument("--batch", action="store_true",
                        help="send the run as one batch job (half price; the workers poll it): providers with a "
                             f"batch API: {', '.join(provider_names('batch'))}")
    parser.add_argument("--write-dir", type=Path, default=None,
                        help="also write <task_id>.json per judged episode, in the reference judge format")
    parser.add_argument("--stall-seconds", type=float, default=None,
                        help="stop waiting (exit 1, naming the units not done) when no episode finished for this long "
                             f"(default {STALL_SECONDS}; with --batch {BATCH_STALL_SECONDS})")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the request per episode as JSON lines and call nothing")


def _dry_run(run: Run, config, stdout) -> int:
    for episode in episodes_left_to_judge(run=run, config=config).select_related("task"):
        built = judge_request_build(episode=episode, config=config)
        line = {"task_id": episode.task.task_id, "system": built.request.system, "prompt": built.request.prompt,
                "images": built.image_paths}
        stdout.write(json.dumps(line, ensure_ascii=False))
    return 0


def _write_dir(run: Run, config, out: Path, stderr) -> int:
    """The reference writes only episodes with a verdict; one without is judged again next time."""
    out.mkdir(parents=True, exist_ok=True)
    judged = Judgment.objects.filter(config=config, episode__run=run).exclude(verdict=Judgment.Verdict.NONE)
    count = 0
    for judgment in judged.select_related("episode__task", "config"):
        record = judgment_reference_record(judgment)
        if not is_plain_name(record["task_id"]):  # a task id is data: it must not pick the folder
            stderr.write(f"skipped task id {record['task_id'][:80]!r}: not a plain name ({PLAIN_NAME_RULE})")
            continue
        (out / f"{record['task_id']}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False))
        count += 1
    return count


def run(options: dict, stdout, stderr) -> int:
    found = run_find(options["run"])
    if found is None:
        stderr.write(f"no run named {options['run']!r}: import it first (taskgen import) or see the runs page")
        return 2
    try:
        if options["batch"] and options["workers"]:  # whether the provider has a batch API: the stage's check
            raise JudgeError("--batch is worked by the Celery workers polling the batch job: no --workers")
        config = judge_config_for(options["provider"], options["model"], None, options["images"])
        if options["dry_run"]:
            return _dry_run(found, config, stdout)
        code, pipeline_run = _judge_on_engine(found, config, options, stderr)
    except (JudgeError, PromptFileError, ValueError) as exc:
        stderr.write(f"judge: {exc}")
        return 2
    if options["write_dir"]:
        stderr.write(f"wrote {_write_dir(found, config, options['write_dir'], stderr)} files to {options['write_dir']}")
    summary = judge_summary(run=found, config=config, errors=pipeline_run.failed if pipeline_run else 0)
    stdout.write(json.dumps(summary))
    return code


def _judge_on_engine(run: Run, config, options: dict, stderr) -> tuple[int, PipelineRun | None]:
    """A judge run on the engine, worked here with threads (--workers N, or the offline rules judge) or by the
    Celery workers (--batch: they poll its Batch API job); waits with a progress bar; non-zero when any episode is
    not judged."""
    batch = options["batch"]
    calls = max(options["workers"], 1 if provider_can(config.provider, "offline") else 0)
    try:  # the raw parameters, so the stage checks them as it does a form's (judge_params_check)
        pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE,
                                 params={"run": run.pk, "config_id": config.pk, "batch": batch}, send_workers=not calls)
    except NothingToDo as nothing:
        stderr.write(str(nothing))  # and no pipeline run is made
        return 0, None
    here = judge_threads_here(config.provider, calls)  # the SDK loaded now, before the threads start
    in_flight = f", {calls} call{'s' if calls > 1 else ''} in flight" if here else ""
    where = where_words(pipeline_run=pipeline_run, work_here=here) + in_flight
    how = " through one Gemini Batch API job" if batch else ""
    stderr.write(f"judging {pipeline_run.total} episodes of {run.name} with {config.key}{how} {where}")
    stall = options["stall_seconds"] or (BATCH_STALL_SECONDS if batch else STALL_SECONDS)
    waited = run_wait(pipeline_run=pipeline_run, stream=stderr, work_here=here, stall_seconds=stall)
    return wait_report(waited=waited, stream=stderr), waited.pipeline_run


