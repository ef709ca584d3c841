"""Services over PipelineRun, the table that tracks every stage start: pages read it, never Celery's backend.
The engine (taskgen/engine/) moves a run's counters and status from its units; this keeps the run's error list."""
from __future__ import annotations

from django.db import transaction

from taskgen.models import PipelineRun

MAX_ERRORS_KEPT = 500


def pipeline_run_error(*, pipeline_run_id: int, error: str) -> None:
    """Append one line to the run's error list (kept to the most recent MAX_ERRORS_KEPT)."""
    with transaction.atomic():
        row = PipelineRun.objects.select_for_update().filter(pk=pipeline_run_id).first()
        if row is None:
            return
        row.errors = (list(row.errors) + [error[:2000]])[-MAX_ERRORS_KEPT:]
        row.save(update_fields=["errors"])
