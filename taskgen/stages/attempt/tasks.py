"""Celery tasks of the attempt stage: one task per episode, on the `browser` queue (see CELERY_TASK_ROUTES)."""
from __future__ import annotations

from pathlib import Path

from celery import shared_task
from django.db import transaction

from taskgen.models import PipelineRun
from taskgen.stages.attempt.service import attempt_episode, attempt_prepare, attempt_reopen, attempt_task_ids


@shared_task(acks_late=True)
def attempt_episode_task(pipeline_run_id: int, task_id: str) -> None:
    """Run one episode; safe to run twice (a finished episode leaves an outcome file and is skipped)."""
    attempt_episode(pipeline_run_id=pipeline_run_id, task_id=task_id)


def attempt_queue(*, pipeline_run: PipelineRun, task_ids: list[str]) -> None:
    """Queue one episode task per task id, once the transaction commits."""
    pk = pipeline_run.pk
    transaction.on_commit(lambda: [attempt_episode_task.delay(pk, task_id) for task_id in task_ids])


def attempt_start(*, tasks_file: Path, agent: str, name: str, mistakes: float = 0.3, seed: int = 0,
                  limit: int | None = None, user=None) -> PipelineRun:
    """Create the run dir and the PipelineRun, and queue one Celery episode task per task (after commit)."""
    pipeline_run = attempt_prepare(tasks_file=tasks_file, agent=agent, name=name, mistakes=mistakes, seed=seed,
                                   limit=limit, user=user)
    attempt_queue(pipeline_run=pipeline_run, task_ids=attempt_task_ids(pipeline_run=pipeline_run))
    return pipeline_run


def attempt_resume(*, pipeline_run: PipelineRun, user=None) -> PipelineRun:
    """Reopen a failed or cancelled attempt and queue only the episodes with no outcome yet."""
    attempt_queue(pipeline_run=pipeline_run, task_ids=attempt_reopen(pipeline_run=pipeline_run))
    pipeline_run.refresh_from_db()
    return pipeline_run
