"""Celery tasks of the attempt stage: one task per episode, on the `browser` queue (see CELERY_TASK_ROUTES)."""
from __future__ import annotations

from celery import shared_task

from taskgen.stages.attempt import attempt_episode


@shared_task(acks_late=True)
def attempt_episode_task(pipeline_run_id: int, task_id: str) -> None:
    """Run one episode; safe to run twice (a finished episode leaves an outcome file and is skipped)."""
    attempt_episode(pipeline_run_id=pipeline_run_id, task_id=task_id)
