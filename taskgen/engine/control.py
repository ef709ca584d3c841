"""Start, cancel and resume runs of the stages on the engine; the same calls for the web, the command line and the
admin, so a run resumes the same way however it was started (its typed parameters are stored with it)."""
from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from taskgen.engine.contract import StageParams
from taskgen.engine.runs import run_finish_if_settled, run_refresh
from taskgen.engine.send import dispatch_on_commit
from taskgen.engine.stage_table import stage_work, workers_per_run
from taskgen.engine.units import OPEN, Status, units_create
from taskgen.models import PipelineRun, WorkUnit


class ResumeError(ValueError):
    """The run cannot be resumed (every unit is done already)."""


def run_start(*, stage: str, params: dict | StageParams, user=None, started_with: dict | None = None,
              send_workers: bool = True) -> PipelineRun:
    """Check the parameters (raises StageParamsError), create the run and its units, and send workers once the
    transaction commits. A stage that finds nothing to do raises NothingToDo (no run is made); a run with no units
    of another stage is finished at once, saying there was nothing to do.

    `send_workers=False`: the caller works the run itself (a command's --workers N) and no worker messages are sent
    (40 for a judge run: a quarter of a second of the command's start on the embedded broker, spent on messages
    nobody may take); the run counts as woken now, so the reconciler sends none while the caller's first leases
    are being taken. Should the caller stop, its leases lapse and the reconciler sends workers then."""
    work = stage_work(stage)
    checked = params if isinstance(params, StageParams) else work.check(params)
    keys = work.units(checked)
    stored = {**checked.as_json(), **({"started_with": started_with} if started_with is not None else {})}
    with transaction.atomic():
        pipeline_run = PipelineRun.objects.create(
            stage=work.name, params=stored, started_by=user, run_id=work.run_of(checked), total=len(keys),
            status=PipelineRun.Status.RUNNING, started_at=timezone.now(),
            woken_at=None if send_workers else timezone.now())
        units_create(pipeline_run=pipeline_run, keys=keys)
        if not keys:
            run_finish_if_settled(pipeline_run_id=pipeline_run.pk)
        elif send_workers:
            dispatch_on_commit(pipeline_run.pk, min(len(keys), workers_per_run(work.name)))
    pipeline_run.refresh_from_db()
    return pipeline_run


def run_cancel(*, pipeline_run: PipelineRun) -> bool:
    """Cancel a run: queued units are dropped at once, units in a worker's hands finish and are recorded."""
    with transaction.atomic():
        cancelled = PipelineRun.objects.filter(pk=pipeline_run.pk, status__in=[
            PipelineRun.Status.QUEUED, PipelineRun.Status.RUNNING]).update(
            status=PipelineRun.Status.CANCELLED, finished_at=timezone.now())
        if cancelled:
            WorkUnit.objects.filter(pipeline_run=pipeline_run, status=Status.QUEUED).update(
                status=Status.CANCELLED, finished_at=timezone.now())
    return cancelled == 1


def run_resume(*, pipeline_run: PipelineRun, send_workers: bool = True) -> PipelineRun:
    """Run again every unit of the run that is not done (failed, cancelled, held under a lease that ran out, or still
    open) with fresh attempts; the same run row, whether it was cancelled, failed, finished with failed units, or is
    stuck running (its worker killed: its units are queued again now, not at the reconciler's next pass).
    `send_workers=False`: the caller works the units itself (as run_start's)."""
    with transaction.atomic():
        locked = PipelineRun.objects.select_for_update().get(pk=pipeline_run.pk)
        reopened = WorkUnit.objects.filter(pipeline_run=locked, status__in=[Status.FAILED, Status.CANCELLED]).update(
            status=Status.QUEUED, attempts=0, not_before=None, finished_at=None)
        lapsed = WorkUnit.objects.filter(pipeline_run=locked, status=Status.RUNNING, lease_until__lt=timezone.now())
        reopened += lapsed.update(status=Status.QUEUED, attempts=0, not_before=None, lease_owner="", lease_until=None)
        still_open = WorkUnit.objects.filter(pipeline_run=locked, status__in=OPEN).count()
        if not reopened and not still_open and locked.status == PipelineRun.Status.DONE:
            raise ResumeError("every unit of this run is done: there is nothing to resume")
        stopped = (timezone.now() - locked.finished_at).total_seconds() if locked.finished_at else 0.0
        PipelineRun.objects.filter(pk=locked.pk).update(status=PipelineRun.Status.RUNNING, finished_at=None,
                                                        woken_at=None if send_workers else timezone.now(),
                                                        stopped_seconds=F("stopped_seconds") + stopped)
        run_refresh(pipeline_run_id=locked.pk)  # the reopened units are no longer counted as failed
        if (reopened or still_open) and send_workers:
            dispatch_on_commit(locked.pk, min(still_open, workers_per_run(locked.stage)))  # reopened ones included
        elif not reopened and not still_open:
            run_finish_if_settled(pipeline_run_id=locked.pk)
    pipeline_run.refresh_from_db()
    return pipeline_run
