"""The engine's Celery tasks: a worker's slice of a run (on its stage's queue) and the reconciler (Celery beat).

Messages only wake workers; the units in the database say what there is to do, so a lost message delays work
(until the reconciler sends another) and a duplicate one finds nothing left to lease.
"""
from __future__ import annotations

import logging
import os
import socket

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from taskgen.engine.contract import StageWork
from taskgen.engine.reconcile import Reconciled, reconcile
from taskgen.engine.stage_table import stage_work
from taskgen.engine.worker import work
from taskgen.models import PipelineRun

log = logging.getLogger(__name__)


@shared_task(name="taskgen.engine.tasks.work_task", bind=True, acks_late=True, reject_on_worker_lost=True)
def work_task(self, pipeline_run_id: int) -> None:
    """Work one slice of a run; hand what is left (now, or when a waiting unit is due) to a new message."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{self.request.id}"
    again_in = work(pipeline_run_id=pipeline_run_id, owner=owner)
    if again_in is not None:
        dispatch(pipeline_run_id, 1, countdown=again_in)


@shared_task(name="taskgen.engine.tasks.reconcile_task", ignore_result=True)
def reconcile_task() -> dict:
    """The periodic reconciler (CELERY_BEAT_SCHEDULE)."""
    outcome = reconcile(dispatch=dispatch)
    return {"requeued": outcome.requeued, "failed": outcome.failed, "woken": outcome.woken}


def dispatch(pipeline_run_id: int, workers: int, countdown: float = 0) -> bool:
    """Send `workers` messages for a run to its stage's queue; False when the broker cannot be reached (the
    reconciler sends them again later)."""
    stage = PipelineRun.objects.filter(pk=pipeline_run_id).values_list("stage", flat=True).first()
    if stage is None:
        return False
    options = _limits(stage_work(stage))
    try:
        for _ in range(max(1, workers)):
            work_task.apply_async((pipeline_run_id,), queue=stage_work(stage).queue, countdown=countdown or None,
                                  retry=False, **options)
    except (OperationalError, OSError) as exc:
        log.warning("could not send workers for pipeline run %s: %s", pipeline_run_id, exc)
        return False
    PipelineRun.objects.filter(pk=pipeline_run_id).update(woken_at=timezone.now())
    return True


def _limits(stage: StageWork) -> dict:
    """A stage whose one unit may outlast a lease (an import of a big run dir) gets time limits that cover it."""
    if not stage.unit_seconds:
        return {}
    soft = settings.ENGINE_SLICE_SECONDS + stage.unit_seconds
    return {"soft_time_limit": soft, "time_limit": soft + 60}


def dispatch_on_commit(pipeline_run_id: int, workers: int) -> None:
    """Send workers once the transaction that created or reopened the run's units commits."""
    transaction.on_commit(lambda: dispatch(pipeline_run_id, workers))


def reconcile_now() -> Reconciled:
    """One reconciler pass from this process (the command line runs it while it waits)."""
    return reconcile(dispatch=dispatch)
