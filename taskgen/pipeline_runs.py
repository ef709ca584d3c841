"""Services over PipelineRun, the table that tracks every stage start: pages read it, never Celery's backend.

Counters move with single UPDATE ... SET done = done + 1 statements so many workers can report at once.
"""
from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from taskgen.models import PipelineRun, Run

MAX_ERRORS_KEPT = 500


def pipeline_run_create(*, stage: str, params: dict, user=None, run: Run | None = None, total: int = 0) -> PipelineRun:
    """A queued PipelineRun row for a stage start."""
    return PipelineRun.objects.create(stage=stage, params=params, started_by=user, run=run, total=total)


def pipeline_run_start(*, pipeline_run_id: int, total: int | None = None) -> bool:
    """Mark a queued run as running; False when it was cancelled (or already finished) meanwhile."""
    fields = {"status": PipelineRun.Status.RUNNING, "started_at": timezone.now()}
    if total is not None:
        fields["total"] = total
    active = [PipelineRun.Status.QUEUED, PipelineRun.Status.RUNNING]
    return PipelineRun.objects.filter(pk=pipeline_run_id, status__in=active).update(**fields) == 1


def pipeline_run_is_cancelled(*, pipeline_run_id: int | None) -> bool:
    """True when an admin cancelled the run: queued work checks this and drops itself."""
    if pipeline_run_id is None:
        return False
    status = PipelineRun.objects.filter(pk=pipeline_run_id).values_list("status", flat=True).first()
    return status == PipelineRun.Status.CANCELLED


def pipeline_run_step(*, pipeline_run_id: int | None, ok: bool, error: str = "") -> None:
    """Count one unit of work as done or failed (with its error), atomically, from any worker."""
    if pipeline_run_id is None:
        return
    field = "done" if ok else "failed"
    PipelineRun.objects.filter(pk=pipeline_run_id).update(**{field: F(field) + 1})
    if error:
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=error)


def pipeline_run_error(*, pipeline_run_id: int, error: str) -> None:
    """Append one line to the run's error list (kept to the most recent MAX_ERRORS_KEPT)."""
    with transaction.atomic():
        row = PipelineRun.objects.select_for_update().filter(pk=pipeline_run_id).first()
        if row is None:
            return
        row.errors = (list(row.errors) + [error[:2000]])[-MAX_ERRORS_KEPT:]
        row.save(update_fields=["errors"])


def pipeline_run_finish(*, pipeline_run_id: int, result: dict | None = None, failed: bool = False) -> None:
    """Close a run: done, or failed; a cancelled run stays cancelled."""
    status = PipelineRun.Status.FAILED if failed else PipelineRun.Status.DONE
    fields = {"status": status, "finished_at": timezone.now()}
    if result is not None:
        fields["result"] = result
    PipelineRun.objects.filter(pk=pipeline_run_id).exclude(status=PipelineRun.Status.CANCELLED).update(**fields)
    PipelineRun.objects.filter(pk=pipeline_run_id, finished_at__isnull=True).update(finished_at=timezone.now())
