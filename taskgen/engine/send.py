"""Sending workers for a run: a message per worker to its stage's queue, and the reconciler's pass from a process
that waits on a run. Celery itself (the app, its tasks, kombu) is imported only when a message is sent: a command
that works its run itself (`taskgen judge RUN --workers N`) sends none, and importing the app cost 85 ms of its
start, before its first model call.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from taskgen.engine.contract import StageWork
from taskgen.engine.reconcile import Reconciled, reconcile
from taskgen.engine.stage_table import stage_work
from taskgen.models import PipelineRun

log = logging.getLogger(__name__)
_celery_app: Callable[[], object] | None = None


def celery_app_set(load: Callable[[], object]) -> None:
    """How to load the Celery app the engine's messages go through, said by the composition root (taskgen/apps.py:
    the engine imports no entry point); loaded at the first message, so the tasks are bound to it and not to
    Celery's default app (amqp on localhost)."""
    global _celery_app
    _celery_app = load


def dispatch(pipeline_run_id: int, workers: int, countdown: float = 0) -> bool:
    """Send `workers` messages for a run to its stage's queue; False when the broker cannot be reached (the
    reconciler sends them again later)."""
    from kombu.exceptions import OperationalError

    if _celery_app is not None:
        _celery_app()
    from taskgen.engine.tasks import work_task

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
