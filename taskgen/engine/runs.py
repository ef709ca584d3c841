"""A PipelineRun as the engine sees it: its counters refreshed from its units, and its end, decided by its units.

Progress, the result summary and resume read the units, nothing else: `done` and `failed` on the run row are a
copy of the units' counts, written at each batch so pages read one row.
"""
from __future__ import annotations

import json
import logging

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from taskgen.engine.stage_table import stage_work
from taskgen.engine.units import OPEN, Status, unit_counts, units_done
from taskgen.models import PipelineRun, WorkUnit
from taskgen.pipeline_runs import MAX_ERRORS_KEPT, pipeline_run_error

log = logging.getLogger(__name__)


def run_refresh(*, pipeline_run_id: int) -> int:
    """Copy the units' counts onto the run row; the number of units still open (queued or running)."""
    counts = unit_counts(pipeline_run_id=pipeline_run_id)
    PipelineRun.objects.filter(pk=pipeline_run_id).update(done=counts[Status.DONE], failed=counts[Status.FAILED])
    return sum(counts[status] for status in OPEN)


def run_count(*, pipeline_run_id: int, done: int, failed: int) -> bool:
    """A worker's batch added to the run's counts in one statement (no count over all its units: a batch costs the
    same at the 100,000th unit as at the first; run_refresh, at the reconciler's passes and the run's end, recounts
    them); whether the run is still running. A run finished or cancelled meanwhile is recounted instead, so a late
    batch never adds to the finish's counts."""
    fields = {"done": F("done") + done, "failed": F("failed") + failed}
    if PipelineRun.objects.filter(pk=pipeline_run_id, status=PipelineRun.Status.RUNNING).update(**fields):
        return True
    run_refresh(pipeline_run_id=pipeline_run_id)
    return False


RECORD_SQL = """
WITH recorded AS (
    UPDATE {unit} SET status = %(done)s::varchar, lease_owner = '', lease_until = NULL, last_error = '',
        finished_at = CASE WHEN status = %(done)s::varchar THEN finished_at ELSE %(now)s END,
        result = COALESCE(%(results)s::jsonb -> id::text, result)
    WHERE id = ANY(%(ids)s)
    RETURNING finished_at = %(now)s AS newly)
UPDATE {run} SET done = done + (SELECT count(*) FROM recorded WHERE newly), failed = failed + %(failed)s
WHERE id = %(run_id)s AND status = %(running)s
RETURNING id"""


def run_batch_record(*, pipeline_run_id: int, results: dict[int, object], failed: int) -> bool:
    """A worker's batch: its units recorded as done with their results (units_done) and the batch added to the
    run's counts (run_count); whether the run is still running. On PostgreSQL both are one statement, so a batch of
    one unit costs two queries with its lease (a unit done twice is counted once: its finished_at is kept, and
    the later result is kept, as units_done does)."""
    if connection.vendor != "postgresql" or not results:
        return run_count(pipeline_run_id=pipeline_run_id, done=units_done(results=results), failed=failed)
    quote = connection.ops.quote_name
    sql = RECORD_SQL.format(unit=quote(WorkUnit._meta.db_table), run=quote(PipelineRun._meta.db_table))
    rich = {str(pk): result for pk, result in results.items() if result is not None}
    params = {"done": Status.DONE, "now": timezone.now(), "results": json.dumps(rich), "ids": list(results),
              "failed": failed, "run_id": pipeline_run_id, "running": PipelineRun.Status.RUNNING}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        running = cursor.fetchone() is not None
    if not running:  # finished or cancelled meanwhile: counted again from its units, never added to the finish's
        run_refresh(pipeline_run_id=pipeline_run_id)
    return running


def run_finish_if_settled(*, pipeline_run_id: int) -> bool:
    """Finish a running run whose every unit is done or failed, with its stage's summary (exactly one caller
    does it: the run row is locked); True if this call finished it."""
    with transaction.atomic():
        pipeline_run = PipelineRun.objects.select_for_update().filter(pk=pipeline_run_id).first()
        if pipeline_run is None or pipeline_run.status != PipelineRun.Status.RUNNING:
            return False
        if WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status__in=OPEN).exists():
            return False
        counts = unit_counts(pipeline_run_id=pipeline_run_id)
        pipeline_run.done, pipeline_run.failed = counts[Status.DONE], counts[Status.FAILED]
        pipeline_run.result = run_summary(pipeline_run=pipeline_run)
        failed = "summary_error" in pipeline_run.result  # e.g. an attempt's import: a resume runs it again
        pipeline_run.status = PipelineRun.Status.FAILED if failed else PipelineRun.Status.DONE
        if failed:
            pipeline_run.errors = [*pipeline_run.errors, pipeline_run.result["summary_error"]][-MAX_ERRORS_KEPT:]
        pipeline_run.finished_at = timezone.now()
        pipeline_run.save(update_fields=["done", "failed", "result", "status", "finished_at", "errors"])
    return True


def run_summary(*, pipeline_run: PipelineRun) -> dict:
    """The stage's summary of a settled run (or the reason it could not be made: its writes are rolled back)."""
    work = stage_work(pipeline_run.stage)
    params = work.read(pipeline_run.params)
    try:
        with transaction.atomic():
            summary = dict(work.finish(pipeline_run, params, pipeline_run.failed))
    except Exception as exc:  # the units are settled either way; the summary says what went wrong
        log.exception("summary of %s failed", pipeline_run)
        summary = {"summary_error": f"{type(exc).__name__}: {exc}"}
    if pipeline_run.total == 0:
        summary["nothing_to_do"] = work.nothing_to_do
    return summary


def run_error(*, pipeline_run_id: int, error: str) -> None:
    """Add one line to the run's error list (the most recent ones are kept: taskgen/pipeline_runs.py)."""
    pipeline_run_error(pipeline_run_id=pipeline_run_id, error=error)
