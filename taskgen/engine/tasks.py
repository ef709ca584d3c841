"""The engine's Celery tasks: a worker's slice of a run (on its stage's queue) and the reconciler (Celery beat).

Messages only wake workers; the units in the database say what there is to do, so a lost message delays work
(until the reconciler sends another) and a duplicate one finds nothing left to lease.
"""
from __future__ import annotations

import os
import socket

from celery import shared_task

from taskgen.engine.reconcile import reconcile
from taskgen.engine.send import dispatch
from taskgen.engine.worker import work


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
