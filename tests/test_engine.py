"""The engine's bookkeeping, called directly: units, leases, the reconciler, cancel and resume, waits that say why."""
from __future__ import annotations

import io
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from taskgen.engine.contract import NothingToDo, RetryLater, StageParams, StageWork
from taskgen.engine.control import ResumeError, run_cancel, run_resume, run_start
from taskgen.engine.reconcile import reconcile
from taskgen.engine.stage_table import ENGINE_STAGES
from taskgen.engine.units import units_lease
from taskgen.engine.wait import run_wait, wait_report
from taskgen.engine.worker import work
from taskgen.models import Judgment, PipelineRun, WorkUnit
from taskgen.stages.judge.service import judge_config_for
from taskgen.stages.judge.work import JudgeParams
from tests.factories import RunFactory
from tests.judge_helpers import shop_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch) -> list:
    """Workers sent for runs (the messages), recorded instead of reaching a broker."""
    calls = []
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kw: calls.append(args[0]))
    return calls


def _judge_run(episodes: int = 3, **extra) -> PipelineRun:
    run = RunFactory()
    for i in range(episodes):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it")
    config = judge_config_for("rules")
    return run_start(stage="judge", params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key), **extra)


def test_a_run_is_its_units_and_finishes_with_a_summary(sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        pipeline_run = _judge_run(3)
    assert pipeline_run.status == "running" and pipeline_run.total == 3 and sent == [pipeline_run.pk] * 3
    assert set(pipeline_run.units.values_list("status", flat=True)) == {"queued"}
    assert work(pipeline_run_id=pipeline_run.pk, owner="w1") is None
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 3, 0)
    assert pipeline_run.result["episodes"] == 3 and pipeline_run.result["errors"] == 0
    assert Judgment.objects.count() == 3


def test_a_judge_run_with_nothing_to_judge_says_so_and_is_not_made(sent):
    first = _judge_run(2)
    work(pipeline_run_id=first.pk, owner="w1")
    with pytest.raises(NothingToDo, match="nothing to judge: every recorded episode of .* has a verdict under rules"):
        run_start(stage="judge", params=first.params)
    assert list(PipelineRun.objects.values_list("pk", flat=True)) == [first.pk]


def test_the_reconciler_requeues_an_expired_lease_then_fails_it_with_the_reason(sent, settings):
    pipeline_run = _judge_run(1)
    [unit] = units_lease(pipeline_run_id=pipeline_run.pk, owner="killed-worker", count=5, lease_seconds=1)
    later = timezone.now() + timedelta(seconds=5)
    outcome = reconcile(dispatch=lambda pk, n: sent.append(pk) or True, now=later)
    assert outcome.requeued == 1 and outcome.woken == [pipeline_run.pk]
    row = WorkUnit.objects.get(pk=unit.pk)
    assert row.status == "queued" and "killed-worker" in row.last_error
    settings.JUDGE_MAX_ATTEMPTS = 1
    WorkUnit.objects.filter(pk=unit.pk).update(status="running", lease_until=timezone.now(), attempts=5)
    outcome = reconcile(dispatch=lambda pk, n: True, now=later)
    row.refresh_from_db()
    pipeline_run.refresh_from_db()
    assert outcome.failed == 1 and row.status == "failed" and "lease expired" in row.last_error
    assert pipeline_run.status == "done" and pipeline_run.failed == 1 and pipeline_run.result["errors"] == 1


def test_a_run_whose_worker_died_gets_workers_at_once_though_some_were_sent_lately(sent):
    """Waiting out ENGINE_WAKE_AGAIN_SECONDS after the last message (a worker re-sends one at each slice's end)
    added up to half a minute to a killed worker's run: those messages were the dead worker's."""
    pipeline_run = _judge_run(2)
    units_lease(pipeline_run_id=pipeline_run.pk, owner="killed-worker", count=5, lease_seconds=1)
    later = timezone.now() + timedelta(seconds=5)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(woken_at=later - timedelta(seconds=1))
    outcome = reconcile(dispatch=lambda pk, n: True, now=later)
    assert outcome.requeued == 2 and outcome.woken == [pipeline_run.pk]
    assert reconcile(dispatch=lambda pk, n: True, now=later).woken == []  # nothing lost now: messages are on their way


def test_a_cancelled_queued_run_resumes_and_finishes_without_judging_twice(sent):
    pipeline_run = _judge_run(3)
    [first] = units_lease(pipeline_run_id=pipeline_run.pk, owner="w1", count=1, lease_seconds=60)
    assert run_cancel(pipeline_run=pipeline_run)
    assert sorted(pipeline_run.units.values_list("status", flat=True)) == ["cancelled", "cancelled", "running"]
    assert work(pipeline_run_id=pipeline_run.pk, owner="w2") is None  # a cancelled run gives no more work
    resumed = run_resume(pipeline_run=pipeline_run)
    assert resumed.pk == pipeline_run.pk and resumed.status == "running"
    WorkUnit.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    reconcile(dispatch=lambda pk, n: True)
    work(pipeline_run_id=pipeline_run.pk, owner="w2")
    resumed.refresh_from_db()
    assert resumed.status == "done" and resumed.done == 3 and Judgment.objects.count() == 3
    with pytest.raises(ResumeError, match="nothing to resume"):
        run_resume(pipeline_run=resumed)


def test_a_run_started_from_the_command_line_resumes_its_failed_units(sent, monkeypatch):
    pipeline_run = _judge_run(2)
    assert "started_with" not in pipeline_run.params  # no form values: its typed parameters are enough
    pipeline_run.units.update(status="failed", last_error="boom", attempts=5)
    call_command("taskgen", "resume", str(pipeline_run.pk), "--workers", "1", stdout=io.StringIO(),
                 stderr=io.StringIO())
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and pipeline_run.done == 2 and pipeline_run.failed == 0


def test_a_rate_limit_wait_requeues_the_unit_for_later_without_counting_a_try(sent, monkeypatch):
    pipeline_run = _judge_run(1)

    def full(*args, **kwargs):
        raise RetryLater(30, "rate limit: wait 30 s")

    monkeypatch.setattr("taskgen.engine.worker.stage_work", _with_do(full))
    again_in = work(pipeline_run_id=pipeline_run.pk, owner="w1")
    unit = pipeline_run.units.get()
    assert unit.status == "queued" and unit.attempts == 0 and "rate limit" in unit.last_error
    assert 25 < again_in <= 30 and unit.not_before > timezone.now() + timedelta(seconds=25)


def test_a_redis_blip_in_the_rate_limiter_is_a_wait_never_a_failure(settings):
    from taskgen.stages.judge.rate_limit import _redis, rate_limit_take

    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    _redis.cache_clear()
    with pytest.raises(RetryLater) as later:
        rate_limit_take(model="gemini-3.5-flash")
    assert not later.value.counts and "rate limiter unreachable" in later.value.reason


def test_the_wait_names_every_unit_not_done_and_exits_non_zero(sent):
    pipeline_run = _judge_run(2)
    pipeline_run.units.filter(pk=pipeline_run.units.first().pk).update(status="failed", last_error="model said no")
    stream = io.StringIO()
    waited = run_wait(pipeline_run=pipeline_run, stream=stream, stall_seconds=0.3, poll_seconds=0.1)
    assert waited.stalled and wait_report(waited=waited, stream=stream) == 1
    text = stream.getvalue()
    assert "stalled" in text and "failed after 0 tries: model said no" in text and "queued after 0 tries" in text


def _with_do(do):
    from dataclasses import replace

    from taskgen.engine.stage_table import stage_work

    return lambda name: replace(stage_work(name), do=do)


@pytest.mark.django_db(transaction=True)
def test_a_unit_longer_than_its_lease_keeps_it_by_its_heartbeat(monkeypatch):
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("the heartbeat writes from its own thread: needs a database other connections see")
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda *args, **kwargs: True)
    seen = []

    def slow(pipeline_run, params, key):  # three leases long; the reconciler runs half way through
        time.sleep(1.6)
        seen.append(reconcile(dispatch=lambda *args: True).requeued)
        time.sleep(1.6)

    monkeypatch.setitem(ENGINE_STAGES, "slow-test", StageWork(
        name="slow-test", check=StageParams.from_json, read=StageParams.from_json, units=lambda params: ["one"],
        do=slow, finish=lambda *args: {}, lease_seconds=1))
    pipeline_run = run_start(stage="slow-test", params={})
    assert work(pipeline_run_id=pipeline_run.pk, owner="w1") is None
    unit = pipeline_run.units.get()
    assert seen == [0] and (unit.status, unit.attempts) == ("done", 1)  # never taken away, never run twice


def test_a_worker_leases_after_its_last_unit_and_comes_back_for_units_due_behind_it(sent):
    pipeline_run = _judge_run(3)
    first, second, third = pipeline_run.units.order_by("pk")
    assert [u.pk for u in units_lease(pipeline_run_id=pipeline_run.pk, owner="w1", count=5, lease_seconds=60,
                                      after=first.pk)] == [second.pk, third.pk]
    pipeline_run.units.filter(pk__in=[second.pk, third.pk]).update(status="queued")
    assert work(pipeline_run_id=pipeline_run.pk, owner="w1") is None
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and pipeline_run.done == 3


def test_a_lease_in_a_big_run_starts_at_the_workers_last_unit_without_reading_the_run():
    """Planned with statistics from before the run (no rows of it), the lease read every unit of the run and sorted
    them, at each unit: the engine's cost per unit grew with the run (bench/engine.py: 3.5 ms at 2,000, 8.4 at
    20,000)."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL query plan")
    from taskgen.engine.units import PICK_SQL, units_create

    pipeline_run = PipelineRun.objects.create(stage="judge", status="running", total=3000)
    units_create(pipeline_run=pipeline_run, keys=[f"episode-{n}" for n in range(3000)])
    settled = list(pipeline_run.units.order_by("pk").values_list("pk", flat=True)[:2000])
    WorkUnit.objects.filter(pk__in=settled).update(status="done")
    inner = PICK_SQL.format(table="taskgen_workunit")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + inner, [pipeline_run.pk, "queued", settled[-1], timezone.now(), 1])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Sort" not in plan, plan


def test_a_stage_that_works_its_units_together_is_called_once_per_batch_and_each_unit_keeps_its_own_outcome(
        monkeypatch, sent):
    """do_batch: one call for the leased batch; a unit given an error fails its try alone and is tried again, a
    unit left out gets an error saying so, the others are done with their results."""
    calls: list[list[str]] = []

    def together(pipeline_run, params, keys):
        calls.append(list(keys))
        first_try = len(calls) == 1
        outcomes = {key: f"wrote {key}" for key in keys if key != "c" or not first_try}
        if first_try:
            outcomes["b"] = OSError("disk full")
        return outcomes

    monkeypatch.setitem(ENGINE_STAGES, "batch-test", StageWork(
        name="batch-test", check=StageParams.from_json, read=StageParams.from_json, units=lambda p: list("abcd"),
        do=lambda *args: pytest.fail("do is not called when the stage works its units together"),
        do_batch=together, finish=lambda *args: {}, batch=10))
    pipeline_run = run_start(stage="batch-test", params={})
    work(pipeline_run_id=pipeline_run.pk, owner="w1")
    units = {u.key: u for u in pipeline_run.units.all()}
    assert calls == [["a", "b", "c", "d"]]
    assert (units["a"].status, units["a"].result, units["d"].status) == ("done", "wrote a", "done")
    assert units["b"].status == "queued" and "OSError: disk full" in units["b"].last_error
    assert units["c"].status == "queued" and "no outcome for this unit" in units["c"].last_error
    WorkUnit.objects.filter(pipeline_run=pipeline_run).update(not_before=None)
    assert work(pipeline_run_id=pipeline_run.pk, owner="w1") is None
    pipeline_run.refresh_from_db()
    assert calls[1] == ["b", "c"] and (pipeline_run.status, pipeline_run.done) == ("done", 4)


def test_a_batch_call_that_raises_is_every_units_error(monkeypatch, sent):
    def broken(pipeline_run, params, keys):
        raise ConnectionError("database went away")

    monkeypatch.setitem(ENGINE_STAGES, "broken-batch", StageWork(
        name="broken-batch", check=StageParams.from_json, read=StageParams.from_json, units=lambda p: ["x", "y"],
        do=lambda *args: None, do_batch=broken, finish=lambda *args: {}, batch=10, max_attempts=1))
    pipeline_run = run_start(stage="broken-batch", params={})
    work(pipeline_run_id=pipeline_run.pk, owner="w1")
    errors = dict(pipeline_run.units.values_list("key", "last_error"))
    assert all("ConnectionError: database went away" in error for error in errors.values()), errors
    assert set(pipeline_run.units.values_list("status", flat=True)) == {"failed"}


def test_a_unit_told_to_wait_after_its_run_was_cancelled_is_cancelled_not_queued(sent, monkeypatch):
    """A unit in a worker's hands when the run is cancelled, whose try then ends in RetryLater (a full rate window, a
    busy model), is cancelled like the run's queued units: a cancelled run shows no queued unit."""
    pipeline_run = _judge_run(2)

    def cancel_then_wait(pipeline_run_, params, key):
        run_cancel(pipeline_run=pipeline_run_)
        raise RetryLater(30, "model busy: 429")

    monkeypatch.setattr("taskgen.engine.worker.stage_work", _with_do(cancel_then_wait))
    assert work(pipeline_run_id=pipeline_run.pk, owner="w1") is None
    statuses = sorted(pipeline_run.units.values_list("status", flat=True))
    assert statuses == ["cancelled", "cancelled"]
    assert all(unit.finished_at is not None for unit in pipeline_run.units.all())
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "cancelled"
    resumed = run_resume(pipeline_run=pipeline_run)
    assert sorted(resumed.units.values_list("status", flat=True)) == ["queued", "queued"]


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_beats_on_after_the_database_ended_its_connection(sent):
    """With short leases, a heart that stopped at its first failed beat (PostgreSQL restarted, the connection
    terminated) let a live worker's units run out of lease and go to another worker, to be done and paid twice."""
    if connection.vendor != "postgresql":
        pytest.skip("terminates PostgreSQL backends")
    from taskgen.engine.worker import Heartbeat

    pipeline_run = _judge_run(1)
    _pool_fill(10)  # idle connections, as a busy worker's pool holds them: each one ended below
    [unit] = units_lease(pipeline_run_id=pipeline_run.pk, owner="w1", count=1, lease_seconds=6)
    with Heartbeat(pks=[unit.pk], owner="w1", lease=6):  # a beat every 2 s
        time.sleep(3)
        with connection.cursor() as cursor:  # every connection to this database but this one (the heart's)
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        time.sleep(7)  # longer than a lease after the last beat before the termination
        lease_until = WorkUnit.objects.get(pk=unit.pk).lease_until
    # (the heart holds no connection between beats: its next beat takes one the pool has checked, or misses once
    # and renews them)
    assert lease_until > timezone.now()


def test_a_heartbeat_gives_its_connection_back_to_the_pool_between_beats(sent):
    """A heart per working thread kept the connection of its first beat until its slice ended: with the process's
    working threads holding theirs, `taskgen judge --workers 16` ran its pool of 24 dry and its beats waited out the
    pool's timeout and missed (34 missed beats in a 25 s run)."""
    if connection.vendor != "postgresql":
        pytest.skip("the connection pool is PostgreSQL's")
    import threading

    from taskgen.engine.worker import Heartbeat

    pipeline_run = _judge_run(1)
    [unit] = units_lease(pipeline_run_id=pipeline_run.pk, owner="w1", count=1, lease_seconds=6)
    heart, held = Heartbeat(pks=[unit.pk], owner="w1", lease=6), []

    def beat() -> None:  # one beat on a thread of its own, as the heart's thread beats
        heart._renew()
        held.append(connection.connection is not None)
        connection.close()

    thread = threading.Thread(target=beat)
    thread.start()
    thread.join()
    assert held == [False]


def _pool_fill(count: int) -> None:
    """`count` connections in use at once from as many threads, then back in the pool, idle."""
    import threading

    barrier = threading.Barrier(count)

    def hold() -> None:
        connection.ensure_connection()
        barrier.wait(10)
        connection.close()

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_each_stage_folder_registers_the_stage_its_name_says_and_is_imported_when_first_asked_for():
    """The engine learns where each stage's work is at Django's start and imports it on first use: a process judging
    a run never imports the export's or the harness's code. Each folder's work module registers the stage named
    after the folder (its trailing underscore dropped)."""
    import json
    import os
    import subprocess
    import sys

    from taskgen.engine.stage_table import stage_names, stages_all
    from taskgen.stages import stage_work_modules

    assert set(stages_all()) == set(stage_names()) == set(stage_work_modules())
    snippet = ("import json, sys, django; django.setup()\n"
               "from taskgen.engine.stage_table import stage_work\n"
               "stage_work('judge')\n"
               "print(json.dumps(sorted(m for m in sys.modules if m.startswith('taskgen.stages') and "
               "m.endswith('.work'))))")
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=True, timeout=120,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}).stdout
    loaded = json.loads(out.strip().splitlines()[-1])
    assert "taskgen.stages.judge.work" in loaded
    unused = {"taskgen.stages.export.work", "taskgen.stages.attempt.work", "taskgen.stages.propose.work"}
    assert not unused & set(loaded)
