"""Celery tasks of the judge stage's Batch API path (queue `judge`): a poll of a Gemini batch job until it is
collected. Judging episode by episode runs on the engine (taskgen/stages/judge/work.py, taskgen/engine/)."""
from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction

from taskgen.models import JudgeConfig, PipelineRun, Run
from taskgen.pipeline_runs import pipeline_run_is_cancelled
from taskgen.providers import ProviderError
from taskgen.stages.judge.batch import judge_batch_poll, judge_batch_start

log = logging.getLogger(__name__)


@shared_task(name="taskgen.stages.judge.tasks.judge_batch_poll_task", acks_late=True, reject_on_worker_lost=True)
def judge_batch_poll_task(pipeline_run_id: int) -> bool:
    """Collect a Gemini batch job if it is done, else look again after settings.JUDGE_BATCH_POLL_SECONDS."""
    if pipeline_run_is_cancelled(pipeline_run_id=pipeline_run_id):
        return True
    try:
        done = judge_batch_poll(pipeline_run_id=pipeline_run_id)
    except ProviderError as exc:
        if not exc.transient:
            raise
        done = False  # the batch service is busy or down: the job is still there, look again later
    if not done:
        judge_batch_poll_task.apply_async((pipeline_run_id,), countdown=settings.JUDGE_BATCH_POLL_SECONDS)
    return done


def judge_start(*, run: Run, config: JudgeConfig, user=None, batch: bool = True) -> PipelineRun:
    """Submit the run's episodes without a verdict as one Gemini Batch API job and have a worker poll it until it
    is collected (a run judged episode by episode goes through the engine: taskgen/stages/judge/work.py)."""
    pipeline_run = judge_batch_start(run=run, config=config, user=user)
    if pipeline_run.params.get("batch_name"):  # a job was submitted (else nothing was left to send)
        pk = pipeline_run.pk
        transaction.on_commit(lambda: judge_batch_poll_task.apply_async(
            (pk,), countdown=settings.JUDGE_BATCH_POLL_SECONDS))
    return pipeline_run
