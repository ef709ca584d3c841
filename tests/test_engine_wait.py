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


def _wait_in_a_thread(pipeline_run, poll_seconds: float = 3600) -> tuple[threading.Thread, list]:
    """The command line's wait (two threads working here, by default an hour between looks) on a thread of its own,
    started; the list gets what it returns."""
    waited = []

    def wait() -> None:
        try:
            waited.append(engine_wait.run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=2,
                                               poll_seconds=poll_seconds))
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


def _run_whose_bookkeeping_fails(monkeypatch, stage: str, fails, tries: int = 2) -> object:
    """A run of four units whose batches are done but whose record (the engine's own write) raises when `fails()`
    says so, as PostgreSQL refused it under server-side binding ("inconsistent types deduced for parameter $1")."""
    from django.db import DatabaseError

    from taskgen.engine import worker

    real_record = worker.run_batch_record

    def record(**kwargs):
        if fails():
            raise DatabaseError("inconsistent types deduced for parameter $1")
        return real_record(**kwargs)

    monkeypatch.setattr(worker, "run_batch_record", record)
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kw: None)
    monkeypatch.setitem(ENGINE_STAGES, stage, StageWork(
        name=stage, check=StageParams.from_json, read=StageParams.from_json, units=lambda params: list("abcd"),
        do=lambda pipeline_run, params, key: key, finish=lambda *args: {}, lease_seconds=1))
    monkeypatch.setattr(engine_wait, "WORK_TRIES", tries)
    return run_start(stage=stage, params={})


def test_a_wait_whose_threads_all_fail_ends_saying_why_not_at_the_stall(monkeypatch, settings):
    """`taskgen judge RUN --workers N` whose threads' every batch record fails: the threads died with a traceback
    each and the command waited out its 10-minute stall with nothing in flight, then blamed a missing worker. Now
    each thread tries again, stops after WORK_TRIES failures with no unit settled, and the wait ends naming the
    error, on the command line and on the run's errors."""
    from taskgen.models import PipelineRun

    settings.ENGINE_RECONCILE_SECONDS = 1  # the lapsed leases go back to the queue at once
    pipeline_run = _run_whose_bookkeeping_fails(monkeypatch, "record-fails", fails=lambda: True)
    waiter, waited = _wait_in_a_thread(pipeline_run, poll_seconds=0.2)
    waiter.join(timeout=90)  # the stall is 600 s: a wait that waits it out is still waiting here
    assert waited, "the wait did not end"
    assert "inconsistent types deduced for parameter $1" in waited[0].stopped_on
    said = io.StringIO()
    assert engine_wait.wait_report(waited=waited[0], stream=said) == 1
    words = said.getvalue()
    assert "stopped: the 2 threads working it here stopped" in words and "taskgen resume" in words
    assert "inconsistent types" in " ".join(PipelineRun.objects.get(pk=pipeline_run.pk).errors)


def test_a_thread_whose_record_failed_once_goes_on_and_the_run_ends_done(monkeypatch, settings):
    """A database that failed two records (a restart, say): the threads go on after a pause, on new connections,
    and the run ends with every unit done."""
    settings.ENGINE_RECONCILE_SECONDS = 1
    failures = []

    def fails() -> bool:
        failures.append(threading.current_thread().name)
        return len(failures) <= 2  # the first two records fail: before, each killed the thread it met, both threads

    pipeline_run = _run_whose_bookkeeping_fails(monkeypatch, "record-fails-once", fails=fails, tries=4)
    waiter, waited = _wait_in_a_thread(pipeline_run, poll_seconds=0.2)
    waiter.join(timeout=90)
    assert waited, "the wait did not end"
    assert not waited[0].stopped_on
    assert waited[0].pipeline_run.status == "done"
    assert len(failures) > 2  # records after the two that failed


def test_a_wait_working_inline_whose_records_fail_ends_saying_why(monkeypatch, settings):
    """`--workers 1` works the run in the waiting thread itself: its failures end the wait the same way, where they
    ended the command with a traceback."""
    settings.ENGINE_RECONCILE_SECONDS = 1
    pipeline_run = _run_whose_bookkeeping_fails(monkeypatch, "record-fails-inline", fails=lambda: True)
    waited = engine_wait.run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, poll_seconds=0.2)
    assert waited.stopped_on.startswith("working it here stopped after 2 failed tries")
    assert "inconsistent types deduced for parameter $1" in waited.stopped_on
