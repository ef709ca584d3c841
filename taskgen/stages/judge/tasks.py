"""Celery tasks of the judge stage (queue `judge`): one task per episode, safe to run twice (late acks; the stored
verdict and the judgment's unique constraint make a redelivered task a no-op or a single write)."""
from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from taskgen.models import JudgeConfig, PipelineRun, Run
from taskgen.pipeline_runs import pipeline_run_finish_if_complete, pipeline_run_is_cancelled, pipeline_run_step
from taskgen.providers import ProviderError
from taskgen.stages.judge.batch import judge_batch_poll, judge_batch_start
from taskgen.stages.judge.service import judge_episode, judge_prepare

log = logging.getLogger(__name__)


@shared_task(name="taskgen.stages.judge.tasks.judge_episode_task", acks_late=True, reject_on_worker_lost=True)
def judge_episode_task(episode_id: int, config_id: int, pipeline_run_id: int | None = None) -> str | None:
    """Judge one episode and count it on its PipelineRun; returns the verdict."""
    if pipeline_run_is_cancelled(pipeline_run_id=pipeline_run_id):
        return None
    try:
        verdict = judge_episode(episode_id=episode_id, config_id=config_id, pipeline_run_id=pipeline_run_id).verdict
    except SoftTimeLimitExceeded:
        pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=False, error=f"episode {episode_id}: time limit")
        verdict = None
    except Exception as exc:  # counted on the run, so a pass ends with the reference's error count
        log.exception("judging episode %s failed", episode_id)
        pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=False, error=f"episode {episode_id}: {exc}"[:2000])
        verdict = None
    else:
        pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=True)
    pipeline_run_finish_if_complete(pipeline_run_id=pipeline_run_id)
    return verdict


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


def judge_start(*, run: Run, config: JudgeConfig, user=None, batch: bool = False) -> PipelineRun:
    """Queue one Celery task per episode still without a verdict (or submit a batch job and have it polled),
    tracked by a new PipelineRun."""
    if batch:
        pipeline_run = judge_batch_start(run=run, config=config, user=user)
        if pipeline_run.params.get("batch_name"):  # a job was submitted (else nothing was left to send)
            pk = pipeline_run.pk
            transaction.on_commit(lambda: judge_batch_poll_task.apply_async(
                (pk,), countdown=settings.JUDGE_BATCH_POLL_SECONDS))
        return pipeline_run
    pipeline_run, ids = judge_prepare(run=run, config=config, user=user)

    def enqueue() -> None:
        for episode_id in ids:
            judge_episode_task.delay(episode_id, config.pk, pipeline_run.pk)

    if ids:
        transaction.on_commit(enqueue)
    return pipeline_run
