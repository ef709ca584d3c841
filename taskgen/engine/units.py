"""Work units in the database: created in bulk, leased in batches by a conditional update, recorded in bulk.

Every write here is a single statement over many units, so the engine's bookkeeping costs a few queries per batch,
not per unit. A unit is done once whatever its lease holder: work is safe to run twice (the stages are idempotent),
so a late worker's result is kept rather than thrown away.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Case, Count, Exists, F, OuterRef, Q, Value, When
from django.utils import timezone

from taskgen.models import PipelineRun, WorkUnit

Status = WorkUnit.Status
OPEN = [Status.QUEUED, Status.RUNNING]
BULK = 2000


@dataclass(frozen=True)
class Leased:
    pk: int
    key: str
    attempts: int


ANALYZE_FROM = 1000  # units in one run from which PostgreSQL's statistics are refreshed when they are created


def units_create(*, pipeline_run: PipelineRun, keys: list[str]) -> int:
    """One queued unit per key (in bulk); the run's total is their number. A big run on PostgreSQL has the units
    table's statistics refreshed first (once, ANALYZE samples a fixed number of rows): planned with statistics from
    before the run, where it has no rows, a lease reads all of the run's units and sorts them, at every unit."""
    WorkUnit.objects.bulk_create([WorkUnit(pipeline_run=pipeline_run, key=key) for key in keys], batch_size=BULK)
    if connection.vendor == "postgresql" and len(keys) >= ANALYZE_FROM:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(WorkUnit._meta.db_table)}")
    return len(keys)


def _due(pipeline_run_id: int):
    now = timezone.now()
    return WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status=Status.QUEUED).filter(
        Q(not_before__isnull=True) | Q(not_before__lte=now))


def units_lease(*, pipeline_run_id: int, owner: str, count: int, lease_seconds: int,
                after: int = 0) -> list[Leased]:
    """Claim up to `count` due units for `owner` until now + lease, in id order from after the unit `after` (a
    worker's last one: the units before it are settled or held, so the lease starts where the work is instead of
    stepping over every settled unit of the run each time): on PostgreSQL one conditional UPDATE ... RETURNING over
    rows locked with SKIP LOCKED (workers never wait on each other); elsewhere a select and a conditional update in
    one transaction (SQLite serialises writers anyway)."""
    now = timezone.now()
    until = now + timedelta(seconds=lease_seconds)  # the heartbeat renews it while the batch is worked
    if connection.vendor == "postgresql":
        return _lease_postgresql(pipeline_run_id, owner[:200], count, now, until, after)
    with transaction.atomic():
        due = _due(pipeline_run_id).filter(pk__gt=after).order_by("pk")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True)
        rows = list(due.values_list("pk", "key", "attempts")[:count])
        if not rows:
            return []
        WorkUnit.objects.filter(pk__in=[pk for pk, _, _ in rows], status=Status.QUEUED).update(
            status=Status.RUNNING, lease_owner=owner[:200], lease_until=until, attempts=F("attempts") + 1)
    return [Leased(pk, key, attempts + 1) for pk, key, attempts in rows]


# The due units are picked once, in a materialized CTE, then updated: as `id IN (SELECT ... LIMIT n FOR UPDATE SKIP
# LOCKED)` the planner may join the subquery as the inner side of a nested loop (when it believes the table nearly
# empty), run it again for every unit it meets, and each run locks the next due unit: one worker leased a whole run.
PICK_SQL = """SELECT id FROM {table} WHERE pipeline_run_id = %s AND status = %s AND id > %s
        AND (not_before IS NULL OR not_before <= %s) ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"""
LEASE_SQL = "WITH picked AS MATERIALIZED (" + PICK_SQL + """)
UPDATE {table} AS unit SET status = %s, lease_owner = %s, lease_until = %s, attempts = unit.attempts + 1
FROM picked WHERE unit.id = picked.id
RETURNING unit.id, unit.key, unit.attempts"""


def _lease_postgresql(pipeline_run_id: int, owner: str, count: int, now, until, after: int) -> list[Leased]:
    sql = LEASE_SQL.format(table=connection.ops.quote_name(WorkUnit._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [pipeline_run_id, Status.QUEUED, after, now, count, Status.RUNNING, owner, until])
        rows = cursor.fetchall()
    return [Leased(pk, key, attempts) for pk, key, attempts in sorted(rows)]


def units_extend(*, pks: list[int], owner: str, lease_seconds: int) -> None:
    """Hold the lease of units still being worked on a while longer (a heartbeat)."""
    until = timezone.now() + timedelta(seconds=lease_seconds)
    WorkUnit.objects.filter(pk__in=pks, status=Status.RUNNING, lease_owner=owner[:200]).update(lease_until=until)


def units_done(*, results: dict[int, object]) -> int:
    """Record units as done with their results (one statement, and one more for the results, in one
    transaction); how many were not done before (a unit finished twice, after its lease ran out under a slow
    worker, is counted once)."""
    if not results:
        return 0
    done = {"status": Status.DONE, "finished_at": timezone.now(), "lease_owner": "", "lease_until": None,
            "last_error": ""}
    rich = [WorkUnit(pk=pk, result=result) for pk, result in results.items() if result is not None]
    with transaction.atomic():  # status and result together: a run seen settled must see every unit's result
        newly = WorkUnit.objects.filter(pk__in=list(results)).exclude(status=Status.DONE).update(**done)
        if rich:
            WorkUnit.objects.bulk_update(rich, ["result"], batch_size=BULK)
    return newly


def unit_again(*, pk: int, error: str, seconds: float, attempts_back: int = 0) -> None:
    """Put a unit back in the queue, not to be leased for `seconds` (attempts_back=1: this try did not count); on a
    run cancelled while the unit was in hand it is cancelled instead, as the run's queued units were (it showed as
    queued on a cancelled run). One statement: a cancel committing meanwhile re-checks the row and cancels it."""
    cancelled = Exists(PipelineRun.objects.filter(pk=OuterRef("pipeline_run_id"),
                                                  status=PipelineRun.Status.CANCELLED))
    now = timezone.now()
    WorkUnit.objects.filter(pk=pk, status=Status.RUNNING).update(
        status=Case(When(cancelled, then=Value(Status.CANCELLED)), default=Value(Status.QUEUED)),
        finished_at=Case(When(cancelled, then=Value(now)), default=Value(None)),
        lease_owner="", lease_until=None, last_error=error[:4000],
        not_before=now + timedelta(seconds=seconds), attempts=F("attempts") - attempts_back)


def unit_failed(*, pk: int, error: str) -> int:
    """A unit that will not be tried again, with its reason; 1 if it was not done or failed already."""
    return WorkUnit.objects.filter(pk=pk).exclude(status__in=[Status.DONE, Status.FAILED]).update(
        status=Status.FAILED, last_error=error[:4000], lease_owner="", lease_until=None, finished_at=timezone.now())


def units_open(*, pipeline_run_id: int) -> bool:
    """Whether any unit of the run is still queued or running (one indexed lookup)."""
    return WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status__in=OPEN).exists()


def unit_counts(*, pipeline_run_id: int) -> Counter:
    """How many units of the run are in each status (one query)."""
    rows = WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id).values_list("status").annotate(n=Count("pk"))
    return Counter(dict(rows))


def next_due_in(*, pipeline_run_id: int) -> float | None:
    """Seconds until the earliest waiting unit of the run may be leased (0 when one is due now); None if none."""
    first = (WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status=Status.QUEUED)
             .order_by(F("not_before").asc(nulls_first=True)).values_list("not_before", flat=True).first())
    if first is None and not WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status=Status.QUEUED).exists():
        return None
    return max(0.0, (first - timezone.now()).total_seconds()) if first else 0.0


def units_not_done(*, pipeline_run_id: int, limit: int = 50) -> list[WorkUnit]:
    """The units of a run that are not done, worst first (failed, then running, then queued), with their errors."""
    order = {Status.FAILED: 0, Status.RUNNING: 1, Status.QUEUED: 2, Status.CANCELLED: 3}
    units = WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id).exclude(status=Status.DONE).order_by("pk")
    return sorted(units[:limit], key=lambda unit: order.get(unit.status, 9))
