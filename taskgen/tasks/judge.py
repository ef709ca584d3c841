"""Celery tasks of the judge stage (queue `judge`): one task per episode, safe to run twice (late acks; the stored
verdict and the judgment's unique constraint make a redelivered task a no-op or a single write)."""
from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from taskgen.pipeline_runs import pipeline_run_finish_if_complete, pipeline_run_is_cancelled, pipeline_run_step
from taskgen.stages.judge import judge_episode

log = logging.getLogger(__name__)


@shared_task(name="taskgen.tasks.judge.judge_episode_task", acks_late=True, reject_on_worker_lost=True)
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
