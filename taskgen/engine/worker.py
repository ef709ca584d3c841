"""A worker's slice of a run: lease a batch of due units, do each, record the batch, until the slice is over.

Called by the Celery task (taskgen/engine/tasks.py) and by `wait` in the command line's own process; it never
sleeps: a unit told to wait goes back to the queue with a time, and the caller is told when work is due again.
"""
from __future__ import annotations

import logging
import random
import threading
import time

from django.conf import settings
from django.db import connection

from taskgen.db_connections import connections_renew
from taskgen.engine.contract import RetryLater, StageParams, StageWork, UnitFailed
from taskgen.engine.runs import run_batch_record, run_error, run_finish_if_settled
from taskgen.engine.stage_table import stage_work
from taskgen.engine.units import (
    Leased,
    next_due_in,
    unit_again,
    unit_failed,
    units_extend,
    units_lease,
    units_open,
)
from taskgen.models import PipelineRun

log = logging.getLogger(__name__)


def backoff_seconds(attempts: int) -> float:
    """Exponential backoff with jitter after a failed try, capped at a minute."""
    ceiling = min(60.0, 2.0 ** attempts)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def work(*, pipeline_run_id: int, owner: str, slice_seconds: float | None = None) -> float | None:
    """Work the run's due units for one slice. Returns None when the run needs no more from this caller (finished,
    stopped, or every open unit is held by another worker), else the seconds until a unit is due again."""
    pipeline_run = PipelineRun.objects.filter(pk=pipeline_run_id, status=PipelineRun.Status.RUNNING).first()
    if pipeline_run is None:
        return None
    stage = stage_work(pipeline_run.stage)
    params = stage.read(pipeline_run.params)
    lease = stage.lease_seconds or settings.ENGINE_LEASE_SECONDS
    count = stage.batch_of(params) if stage.batch_of else stage.batch
    deadline = time.monotonic() + (settings.ENGINE_SLICE_SECONDS if slice_seconds is None else slice_seconds)
    after = 0  # the last unit this slice leased; units before it that came due again are leased when none is after
    worked = False  # a slice works at least one batch, however short it is or slow the machine
    with Heartbeat(pks=[], owner=owner, lease=lease) as heart:
        while not worked or time.monotonic() < deadline:
            batch = units_lease(pipeline_run_id=pipeline_run_id, owner=owner, count=count, lease_seconds=lease,
                                after=after)
            if not batch and after:
                after = 0
                continue
            if not batch:
                break
            after, worked = batch[-1].pk, True
            results, failed = _work_batch(stage, pipeline_run, params, batch, heart=heart)
            if not run_batch_record(pipeline_run_id=pipeline_run_id, results=results, failed=failed):
                return None  # finished or cancelled meanwhile: the units in hand were recorded
    if not units_open(pipeline_run_id=pipeline_run_id):
        run_finish_if_settled(pipeline_run_id=pipeline_run_id)
        return None
    return next_due_in(pipeline_run_id=pipeline_run_id)


class Heartbeat:
    """Renews the lease of the units still in hand every third of a lease while they are worked on, from a thread of
    its own: a unit may take longer than its lease (an attempt's episode), and a killed worker's heart stops with it,
    so its lease runs out and the reconciler hands the unit to another worker."""

    def __init__(self, *, pks: list[int], owner: str, lease: int) -> None:
        self.pks, self.owner, self.lease = list(pks), owner, lease
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True, name="engine-heartbeat")

    def _beat(self) -> None:
        try:
            while not self.stop.wait(self.lease / 3):
                if self.pks:
                    self._renew()
        finally:
            connection.close()

    def _renew(self) -> None:
        """One beat; a beat that fails (the database restarted, this connection terminated) is logged and the next
        one tries on a new connection: with short leases, a heart that stopped for good would let the units of a
        live worker go to another one."""
        try:
            units_extend(pks=list(self.pks), owner=self.owner, lease_seconds=self.lease)
        except Exception as exc:  # noqa: BLE001  (a missed beat only shortens the lease left)
            log.warning("lease heartbeat of %s missed a beat: %s", self.owner, exc)
            connections_renew()
        else:
            # Back to the pool between beats: a heart per working thread held one each from its first beat to its
            # slice's end, and with a process's threads holding theirs the pool ran dry (its beats waited out the
            # pool's timeout and missed).
            connection.close()

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def _work_batch(stage: StageWork, pipeline_run: PipelineRun, params: StageParams, batch: list[Leased], *,
                heart: Heartbeat) -> tuple[dict[int, object], int]:
    """Do each unit of the batch (the heartbeat holds the leases of those not done yet); the results of the units
    done (to be recorded by the caller) and how many units failed for good."""
    results: dict[int, object] = {}
    failed = 0
    heart.pks = [u.pk for u in batch]
    together = _do_together(stage, pipeline_run, params, batch) if stage.do_batch else None
    for position, unit in enumerate(batch):
        heart.pks = [u.pk for u in batch[position:]]
        try:
            results[unit.pk] = (_outcome(together[unit.key]) if together is not None
                                else stage.do(pipeline_run, params, unit.key))
        except RetryLater as later:
            failed += _again(stage, pipeline_run, unit, later)
        except UnitFailed as exc:  # no further try: the stage says another one now would not change it
            failed += _failed_now(pipeline_run, unit, str(exc))
        except Exception as exc:  # one unit's failure is recorded on it; the batch goes on
            log.warning("%s unit %s failed: %s", pipeline_run, unit.key, exc, exc_info=True)
            failed += _failed_try(stage, pipeline_run, unit, f"{type(exc).__name__}: {exc}")
    heart.pks = []
    return results, failed


def _do_together(stage: StageWork, pipeline_run: PipelineRun, params: StageParams,
                 batch: list[Leased]) -> dict[str, object]:
    """The batch's outcomes from the stage's do_batch, each unit's result or the error its try ended with; an error
    of the whole call is every unit's, and a unit it left out has an error saying so."""
    keys = [unit.key for unit in batch]
    try:
        outcomes = stage.do_batch(pipeline_run, params, keys)
    except Exception as exc:  # noqa: BLE001  (recorded on each unit below, as if each had raised it)
        return dict.fromkeys(keys, exc)
    missing = RuntimeError("the stage's batch gave no outcome for this unit")
    return {key: outcomes.get(key, missing) for key in keys}


def _outcome(outcome: object) -> object:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _again(stage: StageWork, pipeline_run: PipelineRun, unit: Leased, later: RetryLater) -> int:
    if later.counts and unit.attempts >= stage.max_attempts:
        return _failed_try(stage, pipeline_run, unit, later.reason)
    seconds = later.seconds or backoff_seconds(unit.attempts)
    unit_again(pk=unit.pk, error=later.reason, seconds=seconds, attempts_back=0 if later.counts else 1)
    return 0


def _failed_now(pipeline_run: PipelineRun, unit: Leased, error: str, tries: str = "") -> int:
    """Fail the unit for good with its error (and how often it was tried), and add it to the run's errors."""
    failed = unit_failed(pk=unit.pk, error=f"{error}{tries}")
    run_error(pipeline_run_id=pipeline_run.pk, error=f"{unit.key}: {error}")
    return failed


def _failed_try(stage: StageWork, pipeline_run: PipelineRun, unit: Leased, error: str) -> int:
    """Try the unit again later, or fail it for good after its attempts; 1 when it failed for good."""
    if unit.attempts < stage.max_attempts:
        unit_again(pk=unit.pk, error=error, seconds=backoff_seconds(unit.attempts))
        return 0
    return _failed_now(pipeline_run, unit, error, f" (after {unit.attempts} tries)")
