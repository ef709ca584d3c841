"""A worker leases the number of units it asks for, whatever plan PostgreSQL picks for the lease. The lease was
`UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`: planned as a nested-loop semi-join (what the
planner picks when it believes the units table is nearly empty: a fresh database, a run under ANALYZE_FROM units),
the limited subquery is run again for every unit it is joined with, and each run locks the next queued unit. One
worker leased a whole run asking for one unit, and worked it alone (seen: `taskgen judge --workers 8` with one call in
flight at a time)."""
from __future__ import annotations

import pytest
from django.db import connection

from taskgen.engine.units import units_create, units_lease
from taskgen.models import PipelineRun, WorkUnit

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="the lease's plan is PostgreSQL's")]


def _run_planned_as_empty(units: int) -> PipelineRun:
    """A run of `units` queued units on a units table PostgreSQL last analyzed empty (a fresh database: what
    autovacuum or a deploy's ANALYZE saw before the first run), and too few units for units_create's own ANALYZE: the
    planner believes the table holds about one row and joins the lease's subquery as the inner side of a nested
    loop, run again for every unit."""
    WorkUnit.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {WorkUnit._meta.db_table}")
    pipeline_run = PipelineRun.objects.create(stage="judge", params={})
    units_create(pipeline_run=pipeline_run, keys=[str(n) for n in range(units)])
    return pipeline_run


@pytest.mark.parametrize("count", [1, 3])
def test_a_lease_takes_the_units_asked_for_on_a_table_planned_as_empty(count):
    pipeline_run = _run_planned_as_empty(16)
    leased = units_lease(pipeline_run_id=pipeline_run.pk, owner="worker-1", count=count, lease_seconds=60)
    assert len(leased) == count
    running = WorkUnit.objects.filter(pipeline_run=pipeline_run, status=WorkUnit.Status.RUNNING)
    assert sorted(running.values_list("pk", flat=True)) == [unit.pk for unit in leased]
    assert [unit.attempts for unit in leased] == [1] * count


def test_a_second_worker_leases_the_next_units():
    pipeline_run = _run_planned_as_empty(6)
    first = units_lease(pipeline_run_id=pipeline_run.pk, owner="worker-1", count=2, lease_seconds=60)
    second = units_lease(pipeline_run_id=pipeline_run.pk, owner="worker-2", count=2, lease_seconds=60)
    assert [u.key for u in first] == ["0", "1"] and [u.key for u in second] == ["2", "3"]
