"""The attempt stage: run a tasks file's episodes in the browser harness, write them as a reference run dir, and
import that run dir as a Run once every episode is settled.

Plain functions over models and files (the engine runs them: taskgen/stages/attempt/work.py). The run dir is
DATA_ROOT/attempts/<name>/: tasks.jsonl (the tasks of the attempt), one folder per task, and results.jsonl (written
before the import). Each episode's outcome is its work unit's result in the database, never a file to count.
"""
from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from sandbox.seed import SITES
from sandbox.sitemap import sitemaps_sync
from taskgen.endings import ENDINGS
from taskgen.engine.contract import StageParamsError, UnitFailed
from taskgen.harness.agents import (
    AgentError,
    agent_cannot,
    agent_create,
    agent_label,
    agent_names,
    agent_options_check,
)
from taskgen.harness.episode import episode_run
from taskgen.harness.rundir import EpisodeRecord, episode_write
from taskgen.harness.server import sandbox_base_url
from taskgen.models import Episode, Run, Site, VerifierResult
from taskgen.names import NotPlainName, plain_name_check
from taskgen.stages.import_.service import import_run_dir


class AttemptError(StageParamsError):
    """The attempt cannot start: a bad tasks file, run name, agent or mistake rate."""


class EpisodeFailed(RuntimeError):
    """An episode that could not be recorded as it happened (the browser died, the site dropped a write, the agent
    could not start): its unit fails with this reason, and a resume runs it again."""


def attempt_tasks_read(*, tasks_file: Path, limit: int | None = None) -> list[dict]:
    """The tasks of a tasks.jsonl, checked (a JSON object with a plain task_id, a site and an instruction)."""
    try:
        text = Path(tasks_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AttemptError(f"cannot read the tasks file {tasks_file}: {exc}") from exc
    tasks, seen = [], set()
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            task = _task_line(line, number)
            if task["task_id"] in seen:
                raise AttemptError(f"line {number}: task {task['task_id']} appears twice")
            seen.add(task["task_id"])
            tasks.append(task)
    if not tasks:
        raise AttemptError(f"{tasks_file} holds no tasks")
    return tasks[:limit] if limit else tasks


def _task_line(line: str, number: int) -> dict:
    try:
        task = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AttemptError(f"line {number} is not JSON: {exc}") from exc
    if not isinstance(task, dict):
        raise AttemptError(f"line {number}: needs a JSON object with a plain task_id")
    try:
        plain_name_check(task.get("task_id"), what="the task_id")
    except NotPlainName as exc:
        raise AttemptError(f"line {number}: {exc}") from exc
    if not task.get("site") or not task.get("instruction"):
        raise AttemptError(f"line {number}: task {task['task_id']} needs a site and an instruction")
    return task


def attempt_run_dir(name: str) -> Path:
    return Path(settings.DATA_ROOT) / "attempts" / name


def attempt_start_check(*, agent: str, name: str, mistakes: float, agent_options: dict | None = None) -> None:
    """The start values an attempt needs: a known agent with usable options (a model agent's server or key), a new
    plain run name, a mistake rate in 0..1."""
    if agent not in agent_names():
        raise AttemptError(f"unknown agent {agent!r}; available: {', '.join(agent_names())}")
    try:
        agent_options_check(name=agent, options=agent_options or {})
    except AgentError as exc:
        raise AttemptError(str(exc)) from exc
    try:
        plain_name_check(name, what="the run name")
    except NotPlainName as exc:
        raise AttemptError(str(exc)) from exc
    if not 0.0 <= mistakes <= 1.0:
        raise AttemptError("the mistake rate must be between 0 and 1")
    if Run.objects.filter(name=name).exists() or attempt_run_dir(name).exists():
        raise AttemptError(f"a run named {name!r} already exists; choose another --name")


def attempt_reach_check(*, agent: str, tasks: list[dict]) -> str:
    """Whether the agent can attempt these tasks: "" when it can attempt them all; a note saying how many it cannot
    (they are recorded as failed episodes, "cannot attempt") when some; AttemptError naming the agents that can when
    it can attempt none."""
    out = [reason for task in tasks if (reason := agent_cannot(agent, task))]
    if not out:
        return ""
    able = [name for name in agent_names() if not any(agent_cannot(name, task) for task in tasks)]
    others = f" Agents that can attempt them all: {', '.join(able)}." if able else ""
    if len(out) == len(tasks):
        raise AttemptError(f"the {agent} agent can attempt none of these {len(tasks)} task(s): {out[0]}.{others}")
    return (f"the {agent} agent cannot attempt {len(out)} of these {len(tasks)} tasks ({out[0]}): they are recorded "
            f"as failed episodes (cannot attempt).{others}")


def attempt_run_dir_create(*, run_dir: Path, tasks: list[dict]) -> list[str]:
    """The run dir with the attempt's tasks.jsonl; the task ids, in order."""
    try:
        run_dir.mkdir(parents=True)
    except FileExistsError as exc:
        raise AttemptError(f"{run_dir} already exists; choose another run name") from exc
    (run_dir / "tasks.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                                         encoding="utf-8")
    return [t["task_id"] for t in tasks]


def _task(run_dir: Path, task_id: str) -> dict:
    for line in (run_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip() and json.loads(line)["task_id"] == task_id:
            return json.loads(line)
    raise EpisodeFailed(f"task {task_id} is not in {run_dir / 'tasks.jsonl'}")


def attempt_episode(*, run_dir: Path, task_id: str, agent: str, mistakes: float, seed: int, agent_options: dict,
                    max_steps: int, label: str) -> dict:
    """Run one episode and write its folder (a rerun replaces it whole); its outcome. EpisodeFailed (after the
    folder is written, so the evidence of the failure is kept) when the episode could not be recorded; UnitFailed
    (no second try unasked) when its model server refused for good."""
    options = {"mistake_rate": mistakes, "seed": seed, **agent_options}
    record = _record(_task(run_dir, task_id), agent, {**options, "max_steps": max_steps}, max_steps, label)
    started = time.perf_counter()
    shutil.rmtree(run_dir / task_id, ignore_errors=True)
    try:
        episode_write(record=record, run_dir=run_dir)
    except OSError as exc:
        raise EpisodeFailed(f"the episode's folder could not be written: {exc}") from exc
    record.timings["write"] = time.perf_counter() - started
    if record.error_final:  # the model server refused for good (a context too long): another try now is waste
        raise UnitFailed(record.error)
    if record.error:
        raise EpisodeFailed(record.error)
    return {"task_id": task_id, "ok": None if record.verifier is None else record.verifier["ok"],
            "parts": (record.verifier or {}).get("parts", []), "finished": record.finished,
            "end_reason": record.end_reason[:500], "end_step": record.end_step, "steps": len(record.rows),
            "timings": record.timings, "cost_usd": record.agent_run.get("cost_usd", "0")}


def _record(task: dict, agent: str, options: dict, max_steps: int, label: str) -> EpisodeRecord:
    try:
        created = agent_create(name=agent, **options)
    except (AgentError, TypeError) as exc:
        return EpisodeRecord(task=task, agent=agent, error=f"the agent could not start: {exc}", finished="error")
    return episode_run(task=task, agent=created, base_url=sandbox_base_url(), max_steps=max_steps, label=label)


def attempt_import(*, run_dir: Path, name: str, agent: str, mistakes: float, outcomes: list[dict],
                   failures: dict[str, str], agent_options: dict | None = None) -> tuple[Run, dict]:
    """results.jsonl from the outcomes, then the run dir imported as a Run; failed episodes marked as failed with
    their reason. Safe to run again (the importer skips what it holds unchanged)."""
    results = "".join(json.dumps({"task_id": o["task_id"], "ok": o["ok"]}) + "\n"
                      for o in sorted(outcomes, key=lambda o: o["task_id"]) if o["ok"] is not None)
    (run_dir / "results.jsonl").write_text(results, encoding="utf-8")
    agent_name = agent_label(agent, agent_options)
    how = f", mistake rate {mistakes}" if agent == "scripted" else ""
    run, _ = Run.objects.get_or_create(name=name, defaults={
        "origin": Run.Origin.ATTEMPT, "agent": agent_name, "source_dir": str(run_dir.absolute()),
        "notes": f"attempted here with the {agent_name} agent{how}"})
    summary = import_run_dir(run_dir=run_dir, name=run.name, verifier_source=VerifierResult.Source.SANDBOX)
    _mark(run, outcomes, failures)
    _sandbox_sites_describe(run)
    cost = sum(Decimal(str(o.get("cost_usd") or 0)) for o in outcomes)
    recorded = set(Episode.objects.filter(run=run).values_list("task__task_id", flat=True))
    return run, {**summary.as_dict(), **attempt_counts(run=run, unrecorded=len(set(failures) - recorded)),
                 "cost_usd": str(cost)}


def attempt_counts(*, run: Run, unrecorded: int = 0) -> dict:
    """An attempted run's episodes counted the one way every attempt's summary says them: how many, how many passed
    the verifier of those it checked, how many failed, and how many ended each way (taskgen/endings.py).
    `unrecorded`: failed episodes that left no folder to import (counted as episodes, and failed)."""
    episodes = Episode.objects.filter(run=run)
    endings = Counter(episodes.values_list("finished", flat=True))
    return {"episodes": episodes.count() + unrecorded,
            "verifier_pass": episodes.filter(verifier_result__ok=True).count(),
            "verifier_results": episodes.filter(verifier_result__isnull=False).count(),
            "failed": episodes.filter(status=Episode.Status.FAILED).count() + unrecorded,
            "endings": {ENDINGS.get(kind, (kind,))[0]: n for kind, n in sorted(endings.items()) if kind}}


def attempt_result_words(result: dict) -> str:
    """An attempt's summary in one line: `3 episodes (1 failed to run); the verifier passed 2 of the 3 it checked
    (ended: ...)`. Episodes that failed to run and episodes a verifier failed are two counts, named apart."""
    endings = ", ".join(f"{n} {kind}" for kind, n in (result.get("endings") or {}).items())
    checked = result.get("verifier_results", 0)
    verified = (f"the verifier passed {result.get('verifier_pass', 0)} of the {checked} it checked" if checked
                else "no verifier checked them")
    return (f"{result.get('episodes', 0)} episodes ({result.get('failed', 0)} failed to run); {verified}"
            + (f" (ended: {endings})" if endings else ""))


def _sandbox_sites_describe(run: Run) -> None:
    """Sandbox sites named by the run get their name and generated sitemap the first time (the proposer reads it)."""
    slugs = set(Episode.objects.filter(run=run).values_list("site__slug", flat=True))
    if slugs & set(SITES) and Site.objects.filter(slug__in=slugs & set(SITES), sitemap={}).exists():
        sitemaps_sync()


def _mark(run: Run, outcomes: list[dict], failures: dict[str, str]) -> None:
    """What the importer cannot know from the files alone: which episodes failed, and the verifier's parts."""
    for task_id, reason in failures.items():
        Episode.objects.filter(run=run, task__task_id=task_id).update(status=Episode.Status.FAILED,
                                                                      failure_reason=reason[:2000])
    for o in outcomes:
        VerifierResult.objects.filter(episode__run=run, episode__task__task_id=o["task_id"]).update(
            detail={"parts": o["parts"]})
