"""The attempt stage as the engine runs it: one unit per task of the tasks file (an episode in Chromium), on the
`browser` queue; once every episode is done or failed, the run dir is imported as a Run (`finish`).

A failed episode (the browser died, the site dropped a write, its folder could not be written) fails its unit with
the reason after its tries; a resume runs exactly the units not done, and the import runs again (it is idempotent).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from taskgen.engine.contract import StageParams, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.harness.agents import external_harness_name
from taskgen.harness.external import external_harnesses
from taskgen.harness.model_agent import agent_step_seconds
from taskgen.models import PipelineRun, WorkUnit

# The attempt's service (the browser harness, the sandbox's sitemaps, the import: 0.17 s of CPU) is imported by the
# functions below when an attempt is checked or worked, not when the stage registers: every process registers every
# stage at its start, and one judging or exporting never attempts.


@dataclass(frozen=True)
class AttemptParams(StageParams):
    """What an attempt runs: the tasks file (its first `limit` tasks), the agent and its options, the run's name.
    `agent_options` are handed to the agent as they are (a model agent's model, temperature...)."""

    tasks_file: str
    agent: str
    name: str
    mistakes: float = 0.3
    seed: int = 0
    limit: int | None = None
    agent_options: dict = field(default_factory=dict)
    run_dir: str = ""
    max_steps: int = 20
    reach_note: str = ""  # how many of the tasks the agent cannot attempt (recorded as failed episodes), if any


def _number(raw: dict, key: str, kind: type, default):
    value = raw.get(key)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        from taskgen.stages.attempt.service import AttemptError

        raise AttemptError(f"{key} must be a number, not {value!r}") from exc


def attempt_params_check(raw: dict) -> AttemptParams:
    """The parameters of an attempt from a form or the command line, checked once (raises AttemptError, a
    StageParamsError): a readable tasks file, a known agent, a new plain run name, a mistake rate in 0..1."""
    from taskgen.stages.attempt.service import (
        AttemptError,
        attempt_reach_check,
        attempt_run_dir,
        attempt_start_check,
        attempt_tasks_read,
    )

    agent, name = str(raw.get("agent") or "scripted"), str(raw.get("name") or "")
    mistakes, seed = _number(raw, "mistakes", float, 0.3), _number(raw, "seed", int, 0)
    limit = _number(raw, "limit", int, None)
    if limit is not None and limit < 1:
        raise AttemptError("the limit must be at least 1 task")
    options = raw.get("agent_options") or {}
    if not isinstance(options, dict):
        raise AttemptError("agent_options must be a JSON object")
    attempt_start_check(agent=agent, name=name, mistakes=mistakes, agent_options=options)
    tasks_file = Path(str(raw.get("tasks_file") or "")).absolute()
    note = attempt_reach_check(agent=agent, tasks=attempt_tasks_read(tasks_file=tasks_file, limit=limit))
    return AttemptParams(tasks_file=str(tasks_file), agent=agent, name=name, mistakes=mistakes, seed=seed,
                         limit=limit, agent_options=options, run_dir=str(attempt_run_dir(name)),
                         max_steps=settings.HARNESS_MAX_STEPS, reach_note=note)


def _units(params: AttemptParams) -> list[str]:
    """The run dir with the attempt's tasks, and one unit per task id (one unit for an external harness)."""
    from taskgen.stages.attempt import external
    from taskgen.stages.attempt.service import attempt_run_dir_create, attempt_tasks_read

    tasks = attempt_tasks_read(tasks_file=Path(params.tasks_file), limit=params.limit)
    task_ids = attempt_run_dir_create(run_dir=Path(params.run_dir), tasks=tasks)
    return [external.UNIT] if external_harness_name(params.agent) else task_ids


def _do(pipeline_run: PipelineRun, params: AttemptParams, key: str) -> dict:
    from taskgen.stages.attempt import external
    from taskgen.stages.attempt.service import attempt_episode

    if external_harness_name(params.agent):
        return external.attempt_external_run(pipeline_run_id=pipeline_run.pk, run_dir=Path(params.run_dir),
                                             name=params.name, agent=params.agent,
                                             agent_options=params.agent_options)
    return attempt_episode(run_dir=Path(params.run_dir), task_id=key, agent=params.agent, mistakes=params.mistakes,
                           seed=params.seed, agent_options=params.agent_options, max_steps=params.max_steps,
                           label=f"{params.name}/{key}")


def _finish(pipeline_run: PipelineRun, params: AttemptParams, failed: int) -> dict:
    """Import the run dir: the done units' outcomes, the failed units' reasons."""
    from taskgen.stages.attempt import external
    from taskgen.stages.attempt.service import attempt_import

    units = WorkUnit.objects.filter(pipeline_run=pipeline_run).order_by("pk")
    if external_harness_name(params.agent):
        return external.attempt_external_finish(pipeline_run=pipeline_run, name=params.name)
    outcomes = [r for r in units.filter(status=WorkUnit.Status.DONE).values_list("result", flat=True) if r]
    failures = dict(units.filter(status=WorkUnit.Status.FAILED).values_list("key", "last_error"))
    run, summary = attempt_import(run_dir=Path(params.run_dir), name=params.name, agent=params.agent,
                                  mistakes=params.mistakes, outcomes=outcomes, failures=failures,
                                  agent_options=params.agent_options)
    pipeline_run.run = run
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(run=run)
    return summary


ATTEMPT_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.ATTEMPT, check=attempt_params_check, read=AttemptParams.from_json, units=_units, do=_do,
    finish=_finish, queue="browser", batch=1, max_attempts=3,
    # one unit may run a browser episode or an external harness for its whole time limit: the worker's time limits
    # cover the longest (an episode's browser time, its agent's time, and the last step's model call past it)
    unit_seconds=max([settings.HARNESS_EPISODE_SECONDS + settings.AGENT_MODEL_SECONDS + agent_step_seconds() + 60,
                      *(h.timeout_seconds for h in external_harnesses().values())]),
    nothing_to_do="nothing to attempt: the tasks file holds no tasks",
))
