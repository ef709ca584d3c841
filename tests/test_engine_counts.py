"""A worker's count refresh never writes counts older than a run's finish (seen with two worker processes: the
finishing one wrote done=8, then the other's refresh, counted before the last unit settled, wrote done=7)."""
from __future__ import annotations

from collections import Counter

import pytest

from taskgen.engine import runs
from taskgen.engine.units import Status
from taskgen.models import PipelineRun, WorkUnit

pytestmark = pytest.mark.django_db


def test_a_refresh_counted_before_the_finish_does_not_undo_its_counts(monkeypatch):
    pipeline_run = PipelineRun.objects.create(stage="judge", status="done", total=2, done=2)
    WorkUnit.objects.bulk_create(WorkUnit(pipeline_run=pipeline_run, key=str(k), status=Status.DONE) for k in range(2))
    real, calls = runs.unit_counts, []

    def counted_too_early(*, pipeline_run_id: int) -> Counter:
        calls.append(pipeline_run_id)
        stale = Counter({Status.DONE: 1, Status.RUNNING: 1})
        return stale if len(calls) == 1 else real(pipeline_run_id=pipeline_run_id)

    monkeypatch.setattr(runs, "unit_counts", counted_too_early)
    still_open, running = runs.run_refresh_running(pipeline_run_id=pipeline_run.pk)
    pipeline_run.refresh_from_db()
    assert (still_open, running, pipeline_run.done, pipeline_run.failed) == (0, False, 2, 0)
