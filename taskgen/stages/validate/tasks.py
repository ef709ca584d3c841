"""Celery task of the validate stage: the summary's periodic refresh and its kept risks' (CELERY_BEAT_SCHEDULE), so the
page finds little left to re-sum even right after a large import or judge run."""
from __future__ import annotations

from celery import shared_task

from taskgen.stages.validate.summary import summary_and_risks_refresh, summary_available


@shared_task(name="taskgen.stages.validate.tasks.validate_summary_refresh_task")
def validate_summary_refresh_task() -> bool:
    """Re-sum the episodes marked since the last refresh and re-read their kept risks; False where no summary is
    kept (SQLite)."""
    if not summary_available():
        return False
    summary_and_risks_refresh()
    return True
