"""An attempt by the user's own harness: one work unit runs the admin-configured command on the attempt's tasks file
(DATA_ROOT/attempts/<name>/tasks.jsonl) with the run dir as its output folder; its output is shown on the run's page
as it comes (the run's result holds the last lines until the summary replaces them); a cancel stops it; on exit 0
the run dir it wrote is imported, on any other ending the run fails with the last lines of its output.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from taskgen.harness.agents import agent_label, external_harness_name
from taskgen.harness.external import external_command, external_run
from taskgen.models import PipelineRun, Run, VerifierResult
from taskgen.stages.import_.service import import_run_dir

UNIT = "harness"  # the one unit of an external attempt
LOG_NAME = "harness_output.log"
LAST_LINES = 20  # of its output, in the error of a failed run


class HarnessFailed(RuntimeError):
    """The harness did not exit 0: the message names how it ended, with its last lines."""


def _harness(agent: str):
    name = external_harness_name(agent)
    harness = settings.EXTERNAL_HARNESSES.get(name)
    if harness is None:
        raise HarnessFailed(f"no external harness {name!r} is configured (TASKGEN_EXTERNAL_HARNESSES)")
    return harness


def _show(pipeline_run_id: int, tail: list[str], lines: int) -> None:
    PipelineRun.objects.filter(pk=pipeline_run_id).update(result={"output_tail": tail, "output_lines": lines})


def _cancelled(pipeline_run_id: int) -> bool:
    return PipelineRun.objects.filter(pk=pipeline_run_id, status=PipelineRun.Status.CANCELLED).exists()


def attempt_external_run(*, pipeline_run_id: int, run_dir: Path, agent: str, agent_options: dict) -> dict:
    """Run the harness on the attempt's tasks file; how it ended (the unit's result: exit code, last lines)."""
    harness = _harness(agent)
    args = external_command(harness, tasks=run_dir / "tasks.jsonl", run_dir=run_dir,
                            arm=agent_options.get("arm") or "base")
    outcome = external_run(harness=harness, args=args, cwd=Path(settings.DATA_ROOT), log_path=run_dir / LOG_NAME,
                           on_output=lambda tail, lines: _show(pipeline_run_id, tail, lines),
                           should_stop=lambda: _cancelled(pipeline_run_id))
    if outcome.stopped == "cancelled":  # not done: a resume runs the harness again
        raise HarnessFailed(f"the harness {harness.name} was stopped: the run was cancelled")
    return {"exit_code": outcome.exit_code, "stopped": outcome.stopped, "output_tail": outcome.tail,
            "output_lines": outcome.lines, "seconds": outcome.seconds, "command": args}


def _ending(result: dict, harness_name: str, timeout: int) -> str:
    if result.get("stopped") == "timed out":
        return f"the harness {harness_name} was stopped at its time limit ({timeout} s)"
    if result.get("stopped"):
        return f"the harness {harness_name} was {result['stopped']}"
    return f"the harness {harness_name} exited with code {result.get('exit_code')}"


def attempt_external_import(*, pipeline_run: PipelineRun, run_dir: Path, name: str, agent: str,
                            agent_options: dict, result: dict | None) -> tuple[Run, dict]:
    """Import the run dir the harness wrote (exit 0); HarnessFailed with its last lines otherwise."""
    harness = _harness(agent)
    if not result or result.get("exit_code") != 0:
        tail = "\n".join((result or {}).get("output_tail", [])[-LAST_LINES:]) or "(no output)"
        ending = _ending(result or {}, harness.name, harness.timeout_seconds) if result else "the harness never ran"
        raise HarnessFailed(f"{ending}; its last lines:\n{tail}")
    label = agent_label(agent, agent_options)
    run, _ = Run.objects.get_or_create(name=name, defaults={
        "origin": Run.Origin.ATTEMPT, "agent": label, "source_dir": str(run_dir.absolute()),
        "notes": f"attempted by the {label}: {' '.join(result.get('command') or [])}"[:2000]})
    summary = import_run_dir(run_dir=run_dir, name=run.name, verifier_source=VerifierResult.Source.RESULTS)
    return run, {**summary.as_dict(), "output_lines": result.get("output_lines", 0),
                 "output_tail": result.get("output_tail", [])[-LAST_LINES:], "harness_seconds": result.get("seconds")}
