"""An attempt by the user's own harness: one work unit runs the admin-configured command on the attempt's tasks file
(DATA_ROOT/attempts/<name>/tasks.jsonl) with the run dir as its output folder; its output is shown on the run's page
as it comes (the run's result holds the last lines until the summary replaces them); a cancel stops it. On exit 0
the run dir it wrote is imported in the unit, which is done only when every episode it was given is there and
imported; any other ending fails the unit at once with the reason (the last lines of its output, or the episodes
missing), so the run fails and a resume runs the harness again.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from taskgen.engine.contract import UnitFailed
from taskgen.engine.wait import resume_words
from taskgen.harness.agents import agent_label, external_harness_name
from taskgen.harness.external import external_command, external_harnesses, external_run
from taskgen.models import Episode, PipelineRun, Run, VerifierResult, WorkUnit
from taskgen.stages.attempt.service import attempt_counts
from taskgen.stages.import_.service import ImportFailed, ImportSummary, import_run_dir

UNIT = "harness"  # the one unit of an external attempt
LOG_NAME = "harness_output.log"
LAST_LINES = 20  # of its output, in the error of a failed run
MISSING_SHOWN = 10  # episodes named in the error of a run that left some missing


class HarnessFailed(RuntimeError):
    """The harness did not exit 0: the message names how it ended, with its last lines."""


def _harness(agent: str):
    name = external_harness_name(agent)
    harness = external_harnesses().get(name)
    if harness is None:
        raise HarnessFailed(f"no external harness {name!r} is configured (TASKGEN_EXTERNAL_HARNESSES)")
    return harness


def _show(pipeline_run_id: int, tail: list[str], lines: int) -> None:
    PipelineRun.objects.filter(pk=pipeline_run_id).update(result={"output_tail": tail, "output_lines": lines})


def _cancelled(pipeline_run_id: int) -> bool:
    return PipelineRun.objects.filter(pk=pipeline_run_id, status=PipelineRun.Status.CANCELLED).exists()


def _promised(run_dir: Path) -> list[str]:
    """The task ids the harness is given (the attempt's tasks.jsonl, read before it runs): an episode is promised
    for each."""
    lines = (run_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["task_id"] for line in lines if line.strip()]


def attempt_external_run(*, pipeline_run_id: int, run_dir: Path, name: str, agent: str, agent_options: dict) -> dict:
    """Run the harness on the attempt's tasks file and import the run dir it wrote; the unit's result (exit code,
    last lines, the import's summary). UnitFailed (no second try unasked; a resume runs it again) when it did not
    exit 0, or did and left an episode it was given missing or unimportable."""
    harness = _harness(agent)
    promised = _promised(run_dir)
    args = external_command(harness, tasks=run_dir / "tasks.jsonl", run_dir=run_dir,
                            arm=agent_options.get("arm") or "base")
    outcome = external_run(harness=harness, args=args, cwd=Path(settings.DATA_ROOT), log_path=run_dir / LOG_NAME,
                           on_output=lambda tail, lines: _show(pipeline_run_id, tail, lines),
                           should_stop=lambda: _cancelled(pipeline_run_id))
    if outcome.stopped == "cancelled":  # not done: a resume runs the harness again
        raise HarnessFailed(f"the harness {harness.name} was stopped: the run was cancelled")
    result = {"exit_code": outcome.exit_code, "stopped": outcome.stopped, "output_tail": outcome.tail,
              "output_lines": outcome.lines, "seconds": outcome.seconds, "command": args}
    if outcome.stopped or outcome.exit_code != 0:
        tail = "\n".join(outcome.tail[-LAST_LINES:]) or "(no output)"
        raise UnitFailed(f"{_ending(result, harness.name, harness.timeout_seconds)}; its last lines:\n{tail}")
    run, summary = _import(pipeline_run_id, run_dir, name, agent, agent_options, args)
    _check_promised(harness.name, run, promised, summary)
    return {**result, "import": summary.as_dict()}


def _import(pipeline_run_id: int, run_dir: Path, name: str, agent: str, agent_options: dict,
            args: list[str]) -> tuple[Run, ImportSummary]:
    label = agent_label(agent, agent_options)
    run, _ = Run.objects.get_or_create(name=name, defaults={
        "origin": Run.Origin.ATTEMPT, "agent": label, "source_dir": str(run_dir.absolute()),
        "notes": f"attempted by the {label}: {' '.join(args)}"[:2000]})
    PipelineRun.objects.filter(pk=pipeline_run_id).update(run=run)
    try:
        summary = import_run_dir(run_dir=run_dir, name=run.name, verifier_source=VerifierResult.Source.RESULTS)
    except ImportFailed as exc:
        raise UnitFailed(f"the harness exited 0, but its run dir could not be imported: {exc}") from exc
    return run, summary


def _check_promised(harness_name: str, run: Run, promised: list[str], summary: ImportSummary) -> None:
    """UnitFailed naming each episode the harness was given that is not in the run, with the importer's reason."""
    imported = set(Episode.objects.filter(run=run).values_list("task__task_id", flat=True))
    missing = [task_id for task_id in promised if task_id not in imported]
    if not missing:
        return
    why: dict[str, str] = {}
    for skip in summary.skipped:  # "<run dir>/<task_id>/grade_inputs.json": episode not imported: ...
        parts = Path(skip.path).parts
        if len(parts) > 1 and (parts[1] not in why or "not imported" in skip.reason):
            why[parts[1]] = f"{'/'.join(parts[2:]) or 'its folder'}: {skip.reason}"
    named = "; ".join(f"{task_id} ({why.get(task_id, 'no episode folder')})" for task_id in missing[:MISSING_SHOWN])
    more = f"; and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
    raise UnitFailed(f"the harness {harness_name} exited 0, but {len(missing)} of the {len(promised)} episodes it "
                     f"was given are missing or could not be imported: {named}{more}. Fix the harness and resume "
                     "the run to run it again")


def _ending(result: dict, harness_name: str, timeout: int) -> str:
    if result.get("stopped") == "timed out":
        return f"the harness {harness_name} was stopped at its time limit ({timeout} s)"
    if result.get("stopped"):
        return f"the harness {harness_name} was {result['stopped']}"
    return f"the harness {harness_name} exited with code {result.get('exit_code')}"


def attempt_external_finish(*, pipeline_run: PipelineRun, name: str) -> dict:
    """The run's summary once its harness unit is settled: HarnessFailed when it failed (its error is the run's),
    else the run's episodes counted as an attempt's summary counts them."""
    unit = WorkUnit.objects.filter(pipeline_run=pipeline_run, key=UNIT).first()
    if unit is None or unit.status != WorkUnit.Status.DONE:
        raise HarnessFailed("the harness run did not succeed (see the error above); "
                            + resume_words(pipeline_run=pipeline_run, work_here=0))
    run = Run.objects.get(name=name)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(run=run)
    result = unit.result or {}
    return {**(result.get("import") or {}), **attempt_counts(run=run), "output_lines": result.get("output_lines", 0),
            "output_tail": result.get("output_tail", [])[-LAST_LINES:], "harness_seconds": result.get("seconds")}
