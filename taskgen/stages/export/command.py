"""`taskgen rows RUN --out DIR`: export approved episodes as a rows folder: an export run on the engine, as the
export page starts it (one unit per episode, on the pipeline page, resumable with `taskgen resume`), worked here."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from django.conf import settings

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.wait import resume_words, run_wait, wait_report, worker_command
from taskgen.models import Export, JudgeConfig, PipelineRun, Run
from taskgen.stages.export.select import ExportError, export_judge_config_default, report_bytes
from taskgen.stages.export.work import export_left_out_words, export_manifest_read
from taskgen.stages.lookup import judge_config_find, run_find

NAME = "rows"
HELP = ("Export approved episodes of RUN as <out>/<task_id>/{rows.jsonl, step_*.png, episode.json} + _report.json "
        "(sites round robin, tasks in file order, whole episodes up to --budget steps). --out must be under the "
        "data root (TASKGEN_DATA_ROOT).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="the run: its name, its id, or the run dir it was imported from")
    parser.add_argument("--out", required=True, help="a new or empty folder under the data root")
    parser.add_argument("--budget", default=str(settings.EXPORT_BUDGET), help="step budget (default %(default)s)")
    parser.add_argument("--source", default=Export.Selection.JUDGE, choices=[c.value for c in Export.Selection],
                        help="which verdicts approve an episode (default: judge, as the reference)")
    parser.add_argument("--judge", default=None,
                        help="judge config (provider:model:prompt:images, or its id); needed when the run has "
                             "verdicts from more than one")
    parser.add_argument("--include-reviewer-rejected", action="store_true",
                        help="also export judge successes whose final human label is Not success (left out by "
                             "default; an adjudicated Not success is never exported)")
    parser.add_argument("--include-verifier-failed", action="store_true",
                        help="also export episodes a verifier failed (left out by default)")
    parser.add_argument("--exclude-risk", default="",
                        help="leave out episodes holding these risks (comma separated: inconsistent, unsupported, "
                             "no_change, judges_disagree, verifier_disagrees)")
    parser.add_argument("--certify", default=None, metavar="TARGET",
                        help="write nothing unless the lower bound on the precision of exactly the episodes to write "
                             "reaches TARGET (e.g. 0.9; see `taskgen certify`); the certificate goes into the "
                             "manifest and _certificate.json")
    parser.add_argument("--confidence", default=None, help="of the certificate's lower bound (default 0.95)")
    parser.add_argument("--workers", type=int, default=1,
                        help="write episodes here with N threads (default %(default)s: on this thread); 0: leave "
                             f"them to the workers of the `default` queue ({worker_command('default')})")
    parser.add_argument("--stall-seconds", type=float, default=600,
                        help="stop waiting (exit 1, naming the episodes not written) when none was written this long")


def find_run(text: str) -> Run:
    """A run by name, id, or the path it was imported from."""
    found = run_find(text)
    if found is None:
        raise ExportError(f"no run named {text!r} (give a run's name, id, or the run dir it was imported from)")
    return found


def find_judge_config(text: str | None, run: Run) -> JudgeConfig:
    """The judge config named on the command line, or the only one that judged this run."""
    if text:
        config = judge_config_find(text)
        if config is None:
            known = ", ".join(c.key for c in JudgeConfig.objects.all()) or "none"
            raise ExportError(f"no judge config {text!r}; known: {known}")
        return config
    try:
        return export_judge_config_default(run=run)
    except ExportError as exc:
        raise ExportError(f"{exc} (--judge CONFIG)") from None


def run(options: dict, stdout, stderr) -> int:
    try:
        the_run = find_run(options["run"])
        config = None
        if options["source"] != Export.Selection.HUMAN or options["judge"]:
            config = find_judge_config(options["judge"], the_run)
        pipeline_run = run_start(stage=PipelineRun.Stage.EXPORT, params={
            "run": the_run.pk, "source": options["source"], "judge_config": config.pk if config else None,
            "budget": options["budget"], "out_dir": str(Path.cwd() / Path(options["out"]).expanduser()),
            "include_reviewer_rejected": options["include_reviewer_rejected"],
            "include_verifier_failed": options["include_verifier_failed"],
            "exclude_risk": [r for r in options["exclude_risk"].split(",") if r.strip()],
            "certify": options["certify"], "confidence": options["confidence"]}, send_workers=not options["workers"])
    except (ExportError, StageParamsError) as exc:
        stderr.write(f"rows: {exc}")
        return 2
    stderr.write(f"rows: {export_left_out_words(pipeline_run=pipeline_run)}")  # before a file is written
    waited = run_wait(pipeline_run=pipeline_run, stream=stderr, work_here=options["workers"],
                      stall_seconds=options["stall_seconds"])
    code = wait_report(waited=waited, stream=stderr)
    if code or waited.pipeline_run.status != PipelineRun.Status.DONE:
        stderr.write("rows: not written in full")
        for error in waited.pipeline_run.errors[-5:]:
            stderr.write(f"  error: {error}")
        if not code:  # every episode written, the run's end failed: a resume runs only the end again
            stderr.write(resume_words(pipeline_run=pipeline_run, work_here=options["workers"]))
        return 1
    # The report from the manifest this process selected and keeps: Export.report reads the row's whole manifest
    # back (a 4 MB JSON decode at full size, the command's peak memory).
    report = export_manifest_read(pipeline_run.params["manifest_sha256"])["report"]
    export = Export.objects.only("pk", "manifest_sha256", "out_dir").get(pk=waited.pipeline_run.result["export_id"])
    stdout.write(report_bytes(report).decode())
    stdout.write(json.dumps({"export": export.pk, "manifest_sha256": export.manifest_sha256, "out": export.out_dir}))
    return 0
