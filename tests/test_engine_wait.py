"""The command line's wait on a run worked here by threads (`taskgen judge RUN --workers N`): it ends when the
threads end the run, not at its next look at the run's progress."""
from __future__ import annotations

import io
import threading

import pytest
from django.db import connection

from taskgen.engine import wait as engine_wait
from taskgen.engine.contract import StageParams, StageWork
from taskgen.engine.control import run_start
from taskgen.engine.stage_table import ENGINE_STAGES

pytestmark = pytest.mark.django_db(transaction=True)  # the threads read and write on connections of their own


def _looks_watched(monkeypatch) -> threading.Event:
    """Set at the wait's first look at the run's progress."""
    looked, real_counts = threading.Event(), engine_wait.unit_counts

    def counts(**kwargs):
        found = real_counts(**kwargs)
        looked.set()
        return found

    monkeypatch.setattr(engine_wait, "unit_counts", counts)
    return looked


def _wait_in_a_thread(pipeline_run) -> tuple[threading.Thread, list]:
    """The command line's wait (two threads working here, an hour between looks) on a thread of its own, started;
    the list gets what it returns."""
    waited = []

    def wait() -> None:
        try:
            waited.append(engine_wait.run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=2,
                                               poll_seconds=3600))
        finally:
            connection.close()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    return waiter, waited


def test_a_wait_with_threads_ends_when_they_end_the_run_not_at_its_next_look(monkeypatch):
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kw: None)
    looked = _looks_watched(monkeypatch)

    def do(pipeline_run, params, key: str) -> str:
        looked.wait(60)  # the units end after the wait's first look at the run, so only a second look sees it end
        return key

    monkeypatch.setitem(ENGINE_STAGES, "wait-test", StageWork(
        name="wait-test", check=StageParams.from_json, read=StageParams.from_json, units=lambda params: list("abc"),
        do=do, finish=lambda *args: {}))
    pipeline_run = run_start(stage="wait-test", params={})
    waiter, waited = _wait_in_a_thread(pipeline_run)
    waiter.join(timeout=120)  # an hour between looks: a wait that looked again only then would still be waiting
    assert waited and waited[0].pipeline_run.status == "done"


def _run_held_by_another_process(monkeypatch, stage: str) -> tuple:
    """A run of two units, both leased by another process (a second `taskgen resume`); the run and its held units."""
    from taskgen.engine.units import units_lease

    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kw: None)
    monkeypatch.setitem(ENGINE_STAGES, stage, StageWork(
        name=stage, check=StageParams.from_json, read=StageParams.from_json, units=lambda params: list("ab"),
        do=lambda pipeline_run, params, key: key, finish=lambda *args: {}))
    pipeline_run = run_start(stage=stage, params={})
    return pipeline_run, units_lease(pipeline_run_id=pipeline_run.pk, owner="the other process", count=2,
                                     lease_seconds=600)


def _the_other_process_settles(pipeline_run) -> None:
    """The other process's last units done, and the run finished, as it does with its last unit."""
    from django.utils import timezone

    from taskgen.engine.runs import run_finish_if_settled, run_refresh
    from taskgen.models import WorkUnit

    WorkUnit.objects.filter(pipeline_run=pipeline_run).update(status="done", finished_at=timezone.now(),
                                                              lease_owner="", lease_until=None)
    run_refresh(pipeline_run_id=pipeline_run.pk)
    run_finish_if_settled(pipeline_run_id=pipeline_run.pk)


def test_a_wait_whose_threads_have_nothing_left_ends_when_another_process_ends_the_run(monkeypatch):
    """Two `taskgen resume RUN --workers N` on one run: the one whose threads ran out of units ends when the other
    settles the last unit, not at its own next look at the run (an hour here)."""
    pipeline_run, held = _run_held_by_another_process(monkeypatch, "tail-test")
    assert len(held) == 2
    looked = _looks_watched(monkeypatch)
    monkeypatch.setattr(engine_wait, "IDLE_SECONDS", 3600)  # its idle threads would not see it for an hour either
    waiter, waited = _wait_in_a_thread(pipeline_run)
    assert looked.wait(60)
    _the_other_process_settles(pipeline_run)
    waiter.join(timeout=30)  # a wait that looked again only at its next look would still be waiting
    assert waited and waited[0].pipeline_run.status == "done"


def _skip_unless_postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("a run's end is heard (LISTEN/NOTIFY) on PostgreSQL only; SQLite's waits read the run's row")


def test_a_wait_hears_another_process_end_the_run_without_reading_its_row(monkeypatch):
    """Two `taskgen resume RUN --workers N` on one run, on PostgreSQL: the one whose threads ran out of units hears
    the other settle the last unit (the run table's trigger notifies), with no look at the run's row meanwhile (an
    hour between looks, between reads of the row, and for its idle threads)."""
    _skip_unless_postgres()
    pipeline_run, held = _run_held_by_another_process(monkeypatch, "heard-test")
    assert len(held) == 2
    monkeypatch.setattr(engine_wait, "IDLE_SECONDS", 3600)
    monkeypatch.setattr(engine_wait, "TAIL_SECONDS", 3600)
    listening = threading.Event()
    real_start = engine_wait.RunEndListener.start

    def start(self) -> bool:
        heard = real_start(self)
        listening.set()
        return heard

    monkeypatch.setattr(engine_wait.RunEndListener, "start", start)
    waiter, waited = _wait_in_a_thread(pipeline_run)
    assert listening.wait(60)
    _the_other_process_settles(pipeline_run)
    waiter.join(timeout=30)  # a wait that read the run's row only every hour would still be waiting
    assert waited and waited[0].pipeline_run.status == "done"


def test_every_end_of_a_run_is_notified_once_and_only_when_it_commits():
    """The trigger's notification: a run leaving `running` by any path (finished, cancelled by an edit), once; a
    rolled-back end and an edit of a run not running send nothing."""
    _skip_unless_postgres()
    import psycopg
    from django.db import transaction

    from taskgen.engine.run_ended import RUN_ENDED_CHANNEL
    from taskgen.models import PipelineRun

    running = [PipelineRun.objects.create(stage="judge", status="running") for _ in range(3)]
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as listening:
        listening.execute(f"LISTEN {RUN_ENDED_CHANNEL}")
        PipelineRun.objects.filter(pk=running[0].pk).update(status="done")
        PipelineRun.objects.filter(pk=running[1].pk).update(status="cancelled")
        PipelineRun.objects.filter(pk=running[1].pk).update(status="failed")  # not running before: nothing
        with pytest.raises(RuntimeError), transaction.atomic():
            PipelineRun.objects.filter(pk=running[2].pk).update(status="done")
            raise RuntimeError("rolled back")
        PipelineRun.objects.filter(pk=running[2].pk).update(errors=["an edit"])  # still running: nothing
        heard = [note.payload for note in listening.notifies(timeout=1.0)]
    assert heard == [str(running[0].pk), str(running[1].pk)]
