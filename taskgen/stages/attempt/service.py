"""The attempt stage: run a tasks file's episodes in the browser harness, one Celery task per episode, write them
as a reference run dir, and import that run dir as a Run when the last episode is in.

`attempt_prepare` creates the run dir and the PipelineRun (`tasks.attempt_start` queues its episodes);
`attempt_episode` (the Celery task, or the CLI with --inline) runs one; the last one to finish imports the run.
The run dir is DATA_ROOT/attempts/<name>/: tasks.jsonl, one folder per task, results.jsonl, and a hidden
.attempt/ folder with one small outcome file per finished episode (how a rerun knows an episode is done).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from sandbox.seed import SITES
from sandbox.sitemap import sitemaps_sync
from taskgen.harness.agents import AgentError, agent_create
from taskgen.harness.episode import episode_run
from taskgen.harness.rundir import EpisodeRecord, episode_write
from taskgen.harness.server import sandbox_base_url
from taskgen.models import Episode, PipelineRun, Run, Site, VerifierResult
from taskgen.names import is_plain_name
from taskgen.pipeline_runs import (
    pipeline_run_create,
    pipeline_run_error,
    pipeline_run_finish,
    pipeline_run_is_cancelled,
    pipeline_run_start,
    pipeline_run_step,
)
from taskgen.stages.import_.service import import_run_dir

AGENTS = {"scripted": "scripted (simulation)"}
OUTCOMES = ".attempt"


class AttemptError(ValueError):
    """The attempt cannot start: a bad tasks file, run name, agent or mistake rate."""


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
    if not isinstance(task, dict) or not is_plain_name(task.get("task_id")):
        raise AttemptError(f"line {number}: needs a JSON object with a plain task_id")
    if not task.get("site") or not task.get("instruction"):
        raise AttemptError(f"line {number}: task {task['task_id']} needs a site and an instruction")
    return task


def attempt_run_dir(name: str) -> Path:
    return Path(settings.DATA_ROOT) / "attempts" / name


def _check_start(*, agent: str, name: str, mistakes: float) -> None:
    if agent not in AGENTS:
        raise AttemptError(f"unknown agent {agent!r}; available: {', '.join(AGENTS)}")
    if not is_plain_name(name):
        raise AttemptError("the run name must be a plain name (letters, digits, - _ .), not a path")
    if not 0.0 <= mistakes <= 1.0:
        raise AttemptError("the mistake rate must be between 0 and 1")
    if Run.objects.filter(name=name).exists() or attempt_run_dir(name).exists():
        raise AttemptError(f"a run named {name!r} already exists; choose another --name")


def attempt_prepare(*, tasks_file: Path, agent: str, name: str, mistakes: float = 0.3, seed: int = 0,
                    limit: int | None = None, user=None) -> PipelineRun:
    """Create the run dir and the PipelineRun of an attempt (its episodes are queued by the caller)."""
    _check_start(agent=agent, name=name, mistakes=mistakes)
    tasks = attempt_tasks_read(tasks_file=tasks_file, limit=limit)
    run_dir = attempt_run_dir(name)
    (run_dir / OUTCOMES).mkdir(parents=True)
    (run_dir / "tasks.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                                         encoding="utf-8")
    params = {"tasks_file": str(tasks_file), "agent": agent, "agent_name": AGENTS[agent], "name": name,
              "mistakes": mistakes, "seed": seed, "limit": limit, "run_dir": str(run_dir),
              "max_steps": settings.HARNESS_MAX_STEPS}
    return pipeline_run_create(stage=PipelineRun.Stage.ATTEMPT, params=params, user=user, total=len(tasks))


def attempt_task_ids(*, pipeline_run: PipelineRun) -> list[str]:
    """The task ids of an attempt, in its tasks file's order."""
    run_dir = Path(pipeline_run.params["run_dir"])
    return [t["task_id"] for t in attempt_tasks_read(tasks_file=run_dir / "tasks.jsonl")]


def attempt_reopen(*, pipeline_run: PipelineRun) -> list[str]:
    """Reopen a failed or cancelled attempt; the task ids with no outcome yet, to queue again (a crashed episode
    has one: it is recorded as failed); with none left, the run is imported now."""
    run_dir = Path(pipeline_run.params["run_dir"])
    done = {p.stem for p in (run_dir / OUTCOMES).glob("*.json")}
    todo = [t["task_id"] for t in attempt_tasks_read(tasks_file=run_dir / "tasks.jsonl") if t["task_id"] not in done]
    resumable = [PipelineRun.Status.FAILED, PipelineRun.Status.CANCELLED]
    status = PipelineRun.Status.QUEUED if todo else PipelineRun.Status.RUNNING
    if not PipelineRun.objects.filter(pk=pipeline_run.pk, status__in=resumable).update(
            status=status, finished_at=None):
        raise AttemptError(f"only a failed or cancelled attempt can be resumed; this one is {pipeline_run.status}")
    if not todo:
        attempt_finish_if_complete(pipeline_run_id=pipeline_run.pk)
    return todo


def _load(pipeline_run_id: int) -> tuple[PipelineRun, Path]:
    pipeline_run = PipelineRun.objects.get(pk=pipeline_run_id)
    return pipeline_run, Path(pipeline_run.params["run_dir"])


def _task(run_dir: Path, task_id: str) -> dict:
    for line in (run_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip() and json.loads(line)["task_id"] == task_id:
            return json.loads(line)
    raise AttemptError(f"task {task_id} is not in {run_dir / 'tasks.jsonl'}")


def attempt_episode(*, pipeline_run_id: int, task_id: str) -> dict | None:
    """Run one episode of an attempt (skipped if already done or the run was cancelled); its outcome."""
    pipeline_run, run_dir = _load(pipeline_run_id)
    marker = run_dir / OUTCOMES / f"{task_id}.json"
    if marker.exists() or pipeline_run_is_cancelled(pipeline_run_id=pipeline_run_id):
        return None
    if pipeline_run.status == PipelineRun.Status.QUEUED:  # the first episode starts the run's clock
        pipeline_run_start(pipeline_run_id=pipeline_run_id)
    record = _record(pipeline_run, run_dir, task_id)
    started = time.perf_counter()
    episode_write(record=record, run_dir=run_dir)
    record.timings["write"] = time.perf_counter() - started
    outcome = {"task_id": task_id, "ok": None if record.verifier is None else record.verifier["ok"],
               "parts": (record.verifier or {}).get("parts", []), "error": record.error,
               "finished": record.finished, "steps": len(record.rows), "timings": record.timings}
    marker.write_text(json.dumps(outcome, ensure_ascii=False), encoding="utf-8")
    pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=not record.error,
                      error=f"{task_id}: {record.error}" if record.error else "")
    attempt_finish_if_complete(pipeline_run_id=pipeline_run_id)
    return outcome


def _record(pipeline_run: PipelineRun, run_dir: Path, task_id: str) -> EpisodeRecord:
    params = pipeline_run.params
    task = _task(run_dir, task_id)
    try:
        agent = agent_create(name=params["agent"], mistake_rate=params["mistakes"], seed=params["seed"])
    except AgentError as exc:
        return EpisodeRecord(task=task, agent=params["agent"], error=str(exc), finished="error")
    return episode_run(task=task, agent=agent, base_url=sandbox_base_url(), max_steps=params["max_steps"],
                       label=f"{params['name']}/{task_id}")


def _outcomes(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((run_dir / OUTCOMES).glob("*.json"))]


def attempt_finish_if_complete(*, pipeline_run_id: int) -> bool:
    """When every episode has an outcome, import the run (exactly one caller wins the claim); True if it did."""
    pipeline_run, run_dir = _load(pipeline_run_id)
    if len(_outcomes(run_dir)) < pipeline_run.total:
        return False
    claimed = PipelineRun.objects.filter(pk=pipeline_run_id, status=PipelineRun.Status.RUNNING,
                                         finished_at__isnull=True).update(finished_at=timezone.now())
    if not claimed:
        return False
    try:
        result = attempt_import(pipeline_run=pipeline_run, run_dir=run_dir)
    except Exception as exc:  # the episodes are on disk; the error says what to import by hand
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=f"import of {run_dir} failed: {exc}")
        pipeline_run_finish(pipeline_run_id=pipeline_run_id, failed=True)
        raise
    pipeline_run_finish(pipeline_run_id=pipeline_run_id, result=result)
    return True


def attempt_import(*, pipeline_run: PipelineRun, run_dir: Path) -> dict:
    """results.jsonl from the outcomes, then the run dir imported as a Run; failed episodes marked as failed."""
    outcomes = _outcomes(run_dir)
    results = "".join(json.dumps({"task_id": o["task_id"], "ok": o["ok"]}) + "\n" for o in outcomes
                      if o["ok"] is not None)
    (run_dir / "results.jsonl").write_text(results, encoding="utf-8")
    params = pipeline_run.params
    run, _ = Run.objects.get_or_create(name=params["name"], defaults={
        "origin": Run.Origin.ATTEMPT, "agent": params["agent_name"], "source_dir": str(run_dir.absolute()),
        "notes": f"attempted here with the {params['agent_name']} agent, mistake rate {params['mistakes']}"})
    summary = import_run_dir(run_dir=run_dir, name=run.name, verifier_source=VerifierResult.Source.SANDBOX)
    _mark(run, outcomes)
    _sandbox_sites_describe(run)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(run=run)
    passed = sum(1 for o in outcomes if o["ok"])
    return {**summary.as_dict(), "episodes": len(outcomes), "verifier_pass": passed,
            "failed": sum(1 for o in outcomes if o["error"])}


def _sandbox_sites_describe(run: Run) -> None:
    """Sandbox sites named by the run get their name and generated sitemap the first time (the proposer reads it)."""
    slugs = set(Episode.objects.filter(run=run).values_list("site__slug", flat=True))
    if slugs & set(SITES) and Site.objects.filter(slug__in=slugs & set(SITES), sitemap={}).exists():
        sitemaps_sync()


def _mark(run: Run, outcomes: list[dict]) -> None:
    """What the importer cannot know from the files alone: which episodes failed, and the verifier's parts."""
    for o in outcomes:
        episodes = Episode.objects.filter(run=run, task__task_id=o["task_id"])
        if o["error"]:
            episodes.update(status=Episode.Status.FAILED, failure_reason=o["error"])
        else:
            VerifierResult.objects.filter(episode__in=episodes).update(detail={"parts": o["parts"]})
