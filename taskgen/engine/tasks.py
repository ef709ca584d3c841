"""Celery tasks of the pipeline stages the app runs itself (import, validate, export): take the PipelineRun id, call
its stage's runner. The runners skip what is already done, so a redelivered or resumed task is safe."""
from __future__ import annotations

from celery import shared_task
from django.db import transaction

from taskgen.engine.stage_runs import stage_run
from taskgen.models import PipelineRun


@shared_task(name="taskgen.engine.tasks.stage_run", soft_time_limit=3300, time_limit=3600)
def stage_run_task(pipeline_run_id: int) -> None:
    stage_run(pipeline_run_id=pipeline_run_id)


def pipeline_run_enqueue(*, pipeline_run: PipelineRun) -> None:
    """Queue the run once the transaction that created (or reopened) it commits."""
    pk = pipeline_run.pk
    transaction.on_commit(lambda: stage_run_task.delay(pk))
