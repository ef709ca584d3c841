"""The reconciler: the database's units against what is really going on, idempotent, safe to run anywhere.

- a running unit whose lease ran out (its worker died, was killed, or lost the database) goes back to the queue,
  or fails with that reason once its stage's attempts are spent;
- a running run with due units and no worker holding any of its units gets workers sent for (its messages may be
  gone: a broker restarted without persistence, a message expired);
- a running run with every unit done or failed is finished with its summary.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from taskgen.engine.runs import run_error, run_finish_if_settled, run_refresh
from taskgen.engine.stage_table import stage_found, stage_names, workers_per_run
from taskgen.engine.units import Status
from taskgen.models import PipelineRun, WorkUnit

Dispatch = Callable[[int, int], bool]


@dataclass
class Reconciled:
    requeued: int = 0
    failed: int = 0
    requeued_runs: set[int] = field(default_factory=set)
    woken: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)


def reconcile(*, dispatch: Dispatch, now=None) -> Reconciled:
    """One pass over every running run; `dispatch(pipeline_run_id, workers)` sends workers for a run."""
    now = now or timezone.now()
    outcome = Reconciled()
    _expired_leases(now, outcome)
    for pipeline_run in PipelineRun.objects.filter(status=PipelineRun.Status.RUNNING, stage__in=stage_names()):
        if run_refresh(pipeline_run_id=pipeline_run.pk) == 0:
            if run_finish_if_settled(pipeline_run_id=pipeline_run.pk):
                outcome.finished.append(pipeline_run.pk)
        elif (_needs_workers(pipeline_run, now, lost=pipeline_run.pk in outcome.requeued_runs)
              and dispatch(pipeline_run.pk, workers_per_run(pipeline_run.stage))):
            outcome.woken.append(pipeline_run.pk)
    return outcome


def _expired_leases(now, outcome: Reconciled) -> None:
    expired = WorkUnit.objects.filter(status=Status.RUNNING, lease_until__lt=now).values_list(
        "pk", "pipeline_run_id", "pipeline_run__stage", "key", "attempts", "lease_owner")
    for pk, run_id, stage, key, attempts, owner in expired:
        reason = f"lease expired: the worker holding it ({owner or 'unknown'}) stopped or was lost"
        work = stage_found(stage)
        spent = attempts >= work.max_attempts if work else True
        fields = {"lease_owner": "", "lease_until": None, "last_error": reason}
        if spent:
            fields.update(status=Status.FAILED, finished_at=now, last_error=f"{reason} (after {attempts} tries)")
        else:
            fields.update(status=Status.QUEUED, not_before=None)
        if WorkUnit.objects.filter(pk=pk, status=Status.RUNNING, lease_until__lt=now).update(**fields):
            outcome.failed += spent
            outcome.requeued += not spent
            outcome.requeued_runs.add(run_id)
            if spent:
                run_error(pipeline_run_id=run_id, error=f"{key}: {fields['last_error']}")


def _needs_workers(pipeline_run: PipelineRun, now, *, lost: bool = False) -> bool:
    """Due units, nobody holding a live lease on any unit of the run, and no workers sent for it lately (unless the
    run just lost its worker: the messages sent lately were the dead worker's)."""
    lately = now - timedelta(seconds=settings.ENGINE_WAKE_AGAIN_SECONDS)
    if not lost and pipeline_run.woken_at and pipeline_run.woken_at > lately:
        return False
    units = WorkUnit.objects.filter(pipeline_run=pipeline_run)
    if units.filter(status=Status.RUNNING, lease_until__gte=now).exists():
        return False
    return units.filter(Q(not_before__isnull=True) | Q(not_before__lte=now), status=Status.QUEUED).exists()

