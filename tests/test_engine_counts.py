"""A worker's counts never undo or add to a run's finish (seen with two worker processes: the finishing one wrote
done=8, then the other's refresh, counted before the last unit settled, wrote done=7). A worker adds its batch to
the run's counts only while the run is running; otherwise the units are counted again."""
from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from taskgen.engine import runs, units
from taskgen.engine.units import Status
from taskgen.models import PipelineRun, WorkUnit

pytestmark = pytest.mark.django_db


def test_a_batch_recorded_after_the_finish_does_not_change_its_counts():
    pipeline_run = PipelineRun.objects.create(stage="judge", status="done", total=2, done=2)
    WorkUnit.objects.bulk_create(WorkUnit(pipeline_run=pipeline_run, key=str(k), status=Status.DONE) for k in range(2))
    running = runs.run_count(pipeline_run_id=pipeline_run.pk, done=1, failed=0)
    pipeline_run.refresh_from_db()
    assert (running, pipeline_run.done, pipeline_run.failed) == (False, 2, 0)


def test_a_batch_recorded_while_running_adds_to_the_counts_without_counting_every_unit(django_assert_num_queries):
    pipeline_run = PipelineRun.objects.create(stage="judge", status="running", total=3, done=1)
    WorkUnit.objects.bulk_create([WorkUnit(pipeline_run=pipeline_run, key="a", status=Status.DONE),
                                  WorkUnit(pipeline_run=pipeline_run, key="b", status=Status.DONE),
                                  WorkUnit(pipeline_run=pipeline_run, key="c", status=Status.QUEUED)])
    with django_assert_num_queries(1):  # one update, whatever the number of units
        running = runs.run_count(pipeline_run_id=pipeline_run.pk, done=1, failed=0)
    pipeline_run.refresh_from_db()
    assert (running, pipeline_run.done) == (True, 2)


@pytest.mark.django_db(transaction=True)
def test_a_unit_is_never_seen_done_without_its_result(monkeypatch):
    """Seen in the attempt kill test: the finishing worker read a unit already done but not yet given its result
    (two statements, each committed alone), so the run's summary counted 9 episodes of 10."""
    if connection.vendor != "postgresql":
        pytest.skip("another connection reading mid-write needs PostgreSQL (SQLite serialises writers)")
    pipeline_run = PipelineRun.objects.create(stage="attempt", status="running", total=1)
    unit = WorkUnit.objects.create(pipeline_run=pipeline_run, key="t1", status=Status.RUNNING)
    seen: list = []
    real_bulk_update = WorkUnit.objects.bulk_update

    def look_from_another_connection(*args, **kwargs):
        def look():
            try:
                seen.append(WorkUnit.objects.filter(pk=unit.pk).values_list("status", "result").get())
            finally:
                connections.close_all()

        other = threading.Thread(target=look)
        other.start()
        other.join()
        return real_bulk_update(*args, **kwargs)

    monkeypatch.setattr(WorkUnit.objects, "bulk_update", look_from_another_connection)
    units.units_done(results={unit.pk: {"task_id": "t1", "ok": True}})
    assert seen and seen[0][0] != Status.DONE, f"another worker saw {seen[0]}: done, with no result yet"
    assert WorkUnit.objects.get(pk=unit.pk).result == {"task_id": "t1", "ok": True}


def _running_run(*statuses: str) -> tuple[PipelineRun, list[WorkUnit]]:
    pipeline_run = PipelineRun.objects.create(stage="judge", status="running", total=len(statuses))
    made = WorkUnit.objects.bulk_create([WorkUnit(pipeline_run=pipeline_run, key=str(n), status=status)
                                         for n, status in enumerate(statuses)])
    return pipeline_run, sorted(made, key=lambda unit: unit.pk)


def test_a_batch_is_recorded_and_counted_in_one_statement_on_postgresql(django_assert_num_queries):
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere the units and the run's counts are two statements")
    pipeline_run, (unit,) = _running_run(Status.RUNNING)
    with django_assert_num_queries(1):
        running = runs.run_batch_record(pipeline_run_id=pipeline_run.pk, results={unit.pk: "SUCCESS"}, failed=0)
    pipeline_run.refresh_from_db()
    unit.refresh_from_db()
    assert running and pipeline_run.done == 1 and (unit.status, unit.result, unit.lease_until) == ("done", "SUCCESS",
                                                                                                  None)


def test_a_batch_is_recorded_under_server_side_binding_too(monkeypatch):
    """With PostgreSQL's OPTIONS {"server_side_binding": True} psycopg sends parameters apart from the statement and
    PostgreSQL deduces each one's type once: the status parameter, compared to a varchar and written into one, must
    say its type or the batch fails ("inconsistent types deduced for parameter")."""
    if connection.vendor != "postgresql":
        pytest.skip("server-side binding is PostgreSQL's")
    from django.db.backends.postgresql.base import ServerBindingCursor

    pipeline_run, (unit,) = _running_run(Status.RUNNING)
    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "cursor_factory", ServerBindingCursor)
    assert runs.run_batch_record(pipeline_run_id=pipeline_run.pk, results={unit.pk: {"verdict": "SUCCESS"}}, failed=1)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.done, pipeline_run.failed, WorkUnit.objects.get(pk=unit.pk).result) == (
        1, 1, {"verdict": "SUCCESS"})


def test_a_unit_recorded_twice_is_counted_once_and_keeps_its_first_finish_and_the_later_result():
    pipeline_run, (first, second) = _running_run(Status.RUNNING, Status.RUNNING)
    runs.run_batch_record(pipeline_run_id=pipeline_run.pk, results={first.pk: {"try": 1}, second.pk: None}, failed=0)
    finished_at = WorkUnit.objects.get(pk=first.pk).finished_at
    assert runs.run_batch_record(pipeline_run_id=pipeline_run.pk, results={first.pk: {"try": 2}}, failed=1)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.done, pipeline_run.failed) == (2, 1)
    again, untouched = WorkUnit.objects.get(pk=first.pk), WorkUnit.objects.get(pk=second.pk)
    assert (again.result, again.finished_at) == ({"try": 2}, finished_at)
    assert (untouched.status, untouched.result) == ("done", None)


def test_a_batch_recorded_after_the_run_was_cancelled_is_recounted_not_added():
    pipeline_run, (late, _) = _running_run(Status.RUNNING, Status.CANCELLED)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(status="cancelled", done=0)
    assert not runs.run_batch_record(pipeline_run_id=pipeline_run.pk, results={late.pk: "SUCCESS"}, failed=1)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.done, pipeline_run.failed) == (1, 0) and WorkUnit.objects.get(pk=late.pk).status == "done"
