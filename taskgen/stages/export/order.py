"""The export's order and what a selection reads of each episode, as far into the run as it needs.

The order is the reference's `rows` stage: sites sorted by name, interleaved round robin, each site's tasks in the
tasks file's order (a task without an episode still takes its turn), or in the episodes' own order when the file is
gone or no longer lists every episode's task. Computing it reads every episode of the run (a second at 100,000), so
it is kept (`ExportOrder`) with a signature of what it was computed from (the run's episodes: their count and sums
of ids as validate's summary keeps them, one row, and counted from the ids, which the summary cannot answer while
marks wait; the tasks file: path, size and time), and computed again when that changes. A selection then reads the
order's episodes a chunk at a time (`order_chunks`), with what decides it for each (the judge config's verdict, the
final label, the verifier's failure, the risks it holds), so a selection that stops at its budget reads a few
thousand episodes whatever the run's size.
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Max, Sum

from taskgen.id_arrays import among
from taskgen.models import (
    Episode,
    ExportOrder,
    FinalLabel,
    JudgeConfig,
    Judgment,
    LabelVerdict,
    Run,
    Task,
    VerifierResult,
)
from taskgen.stages.validate.summary import summary_and_risks_refresh, summary_available
from taskgen.triage.risk import RISK_NAMES, risk_sets
from taskgen.triage.risks_kept import kept_risk_sets

FIRST_CHUNK = 8192  # episodes read at once; each further chunk doubles up to LAST_CHUNK, by default the same size:
LAST_CHUNK = 8192  # a selection at the reference's budget needs ~25,000 of a million-episode run, doubling read 57,000
MIN_CHUNK = 1024  # the least a reader that says how far it expects to go (`order_chunks`: wanted) is given at once


@dataclass
class SelectContext:
    """What the selections of one computation share: a certificate selects the same run for its population, its
    frame and every cut, each reading the same chunks of the order. Made for one computation and dropped after it."""

    reads: dict = field(default_factory=dict)
    # False: the chunks' rows carry no task id or site (a certificate reads neither, and each chunk then skips looking
    # up its tasks); a selection made with such a context is never written (export_manifest refuses it)
    names: bool = True

    @staticmethod
    def named(context: SelectContext | None) -> bool:
        """Whether a selection made in `context` (None: a selection of its own) carries task ids and sites."""
        return context is None or context.names

    def get(self, key: tuple, make):
        if key not in self.reads:
            self.reads[key] = make()
        return self.reads[key]


def _read(context: SelectContext | None, key: tuple, make):
    return make() if context is None else context.get(key, make)


def tasks_file_slots(run: Run) -> dict[str, int] | None:
    """Each task's place within its site in the run's tasks file (the reference walks the file, so a task without an
    episode still takes its turn); None when the file is gone or unreadable, and episodes alone give the order."""
    path = Path(run.tasks_file) if run.tasks_file else None
    if path is None or not path.is_file():
        return None
    slots: dict[str, int] = {}
    per_site: dict[str, int] = {}
    try:
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.strip():
                task = json.loads(line)
                slots.setdefault(task["task_id"], per_site.get(task["site"], 0))
                per_site[task["site"]] = per_site.get(task["site"], 0) + 1
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return slots


def _round_robin(episodes: list[dict], slots: dict[str, int] | None) -> list[dict]:
    """Sites sorted by name, each site's tasks in file order, one from each site per round."""
    by_site: dict[str, list[dict]] = {}
    for row in sorted(episodes, key=lambda r: (r["task_order"], r["id"])):
        by_site.setdefault(row["site__slug"], []).append(row)
    ranked = []
    for site in sorted(by_site):
        for index, row in enumerate(by_site[site]):
            ranked.append(((slots[row["task__task_id"]] if slots else index), site, row))
    return [row for *_, row in sorted(ranked, key=lambda item: item[:2])]


def episodes_in_order(run: Run) -> tuple[list[int], str]:
    """The run's episode ids in the reference's order, computed from every episode, and what ordered them."""
    rows = list(Episode.objects.filter(run=run).values("id", "task_order", "task__task_id", "site__slug"))
    slots = tasks_file_slots(run)
    if slots is not None and any(row["task__task_id"] not in slots for row in rows):
        slots = None  # the file no longer lists every episode's task: fall back to the episodes' own order
    return [row["id"] for row in _round_robin(rows, slots)], ("tasks file" if slots is not None else "episodes")


_UNSUMMED = "summed:?"  # a signature's first part while validate's summary had marks waiting


def _summed(run: Run) -> str | None:
    """The run's episodes as validate's summary counts them (RunEpisodes: one row), None where the summary is not
    kept or has marks waiting (an episode written since its last refresh); read with the marks in one statement."""
    if not summary_available():
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT max(id) FROM review_validatedirtyepisode) IS NULL, r.episodes, r.id_sum, "
                       "r.id_square_sum FROM (SELECT 1) AS one LEFT JOIN taskgen_runepisodes r ON r.run_id = %s",
                       [run.pk])
        current, episodes, total, squares = cursor.fetchone()
    return f"summed:{episodes or 0}:{total or 0}:{squares or 0}" if current else None


def _counted(run: Run) -> str:
    """The run's episodes counted from their ids: COUNT, MAX and SUM over the run (0.05-0.3 s at a million)."""
    found = Episode.objects.filter(run=run).aggregate(n=Count("id"), top=Max("id"), total=Sum("id"))
    return f"counted:{found['n']}:{found['top']}:{found['total']}"


def _tasks_file(run: Run) -> str:
    path = Path(run.tasks_file) if run.tasks_file else None
    try:
        stat = path.stat() if path else None
    except OSError:
        stat = None
    file = f"{path}:{stat.st_size}:{stat.st_mtime_ns}" if stat else "no tasks file"
    return hashlib.sha256(file.encode()).hexdigest()[:32]


def _signature(run: Run) -> str:
    """What an order is computed from: the run's episodes (summed where the summary is current, and counted) and its
    tasks file. Read before the episodes are, so an order is never newer than its signature says."""
    return f"{_summed(run) or _UNSUMMED}|{_counted(run)}|{_tasks_file(run)}"


def _still_holds(run: Run, signature: str) -> bool:
    """Whether a kept order's signature still describes the run: by the summary's sums when both have them (one
    row), else by counting the run's ids."""
    parts = signature.split("|")
    if len(parts) != 3 or parts[2] != _tasks_file(run):
        return False  # another tasks file, or a signature of an older form: computed again
    summed = _summed(run)  # before the count: a sum kept below is never newer than the order it describes
    if summed is not None and parts[0] != _UNSUMMED:
        return parts[0] == summed
    if parts[1] != _counted(run):
        return False
    if summed is not None:  # kept while marks waited: the sums from now on, so later calls skip the count
        ExportOrder.objects.filter(run=run, signature=signature).update(signature="|".join([summed, *parts[1:]]))
    return True


def export_order(run: Run, context: SelectContext | None = None) -> tuple[array, str]:
    """The run's episode ids in export order and what ordered them ("tasks file" or "episodes"): the kept order
    when its signature still holds, else computed and kept."""
    return _read(context, ("order", run.pk), lambda: _export_order(run))


def _ids_packed(ids: list[int]) -> bytes:
    """The ids as ExportOrder keeps them: little-endian 64-bit integers."""
    packed = array("q", ids)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _ids_unpacked(data: bytes) -> array:
    """ExportOrder's ids as 64-bit integers: an array of the standard library (numpy, imported for this alone, was
    12 MB of every process's 84 MB at start)."""
    ids = array("q")
    ids.frombytes(data)
    if sys.byteorder == "big":
        ids.byteswap()
    return ids


def _kept_ids(run: Run, signature: str) -> array | None:
    """The kept order's ids, if it still has this signature. On PostgreSQL the ids (8 MB at a million episodes, kept
    uncompressed: migration 0024) come as binary: in the driver's default text they are 16 MB of hex to decode (75
    ms against 12-30 ms)."""
    kept = ExportOrder.objects.filter(run=run, signature=signature).values_list("episode_ids", flat=True)
    if connection.vendor != "postgresql":
        data = kept.first()
    else:
        import psycopg  # here, not at the top: the driver is 22 MB of a process's memory where SQLite serves it

        sql, params = kept.query.sql_with_params()
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:  # Django's connection and transaction, binary results
            cursor.execute(sql, params, binary=True)
            data = (cursor.fetchone() or (None,))[0]
    return None if data is None else _ids_unpacked(bytes(data))


_RECENT: dict[int, tuple[str, array, str]] = {}  # run id -> signature, ids, what ordered them: this process's last
_RECENT_RUNS = 2  # orders kept in a process (8 MB each at a million episodes)
_RECENT_LOCK = threading.Lock()


def _recent(run: Run, signature: str, found: tuple[array, str] | None = None) -> tuple[array, str] | None:
    """The order this process last read for the run, if it has this signature (its ids as the kept row holds
    them: one signature, one order); with `found`, remember it."""
    if found is not None:
        with _RECENT_LOCK:  # a web worker's threads
            _RECENT.pop(run.pk, None)
            while len(_RECENT) >= _RECENT_RUNS:
                _RECENT.pop(next(iter(_RECENT)))
            _RECENT[run.pk] = (signature, *found)
        return found
    recent = _RECENT.get(run.pk)
    return recent[1:] if recent is not None and recent[0] == signature else None


def _export_order(run: Run) -> tuple[array, str]:
    kept = ExportOrder.objects.filter(run=run).values_list("signature", "order_from").first()
    if kept is not None and _still_holds(run, kept[0]):
        if (recent := _recent(run, kept[0])) is not None:
            return recent
        if (ids := _kept_ids(run, kept[0])) is not None:
            return _recent(run, kept[0], (ids, kept[1]))
    signature = _signature(run)
    ids, order_from = episodes_in_order(run)
    packed = _ids_packed(ids)
    try:
        with transaction.atomic():
            ExportOrder.objects.update_or_create(run=run, defaults={"signature": signature, "order_from": order_from,
                                                                    "episode_ids": packed})
    except IntegrityError:
        pass  # kept by another request at the same moment, from the same episodes
    return _recent(run, signature, (_ids_unpacked(packed), order_from))


class ChunkRow(NamedTuple):
    """An episode as a selection reads it (a tuple: a certificate's cuts keep tens of thousands of them at once)."""

    id: int
    task_order: int
    task_id: str
    site: str
    has_rows: bool
    row_count: int
    content_hash: str


@dataclass
class Chunk:
    """A stretch of the order: each episode some source can approve (its row) and what decides its selection."""

    rows: list[ChunkRow]
    finals: dict[int, tuple[str, bool]]
    judge_yes: set[int]
    failed: set[int]
    config_id: int | None
    positions: int = 0  # the stretch of the order it covers, approvable or not
    _risks: dict[str, set[int]] | None = None
    reasons: dict[tuple, list[str | None]] = field(default_factory=dict)  # per selection rule (select.py: _Rule)

    def risks(self) -> dict[str, set[int]]:
        """The chunk's episodes holding each risk (taskgen/triage/risk.py), read the first time they are asked for."""
        if self._risks is None:
            self._risks = chunk_risk_sets([r.id for r in self.rows], self.config_id)
        return self._risks


def chunk_risk_sets(ids: list[int], config_id: int | None) -> dict[str, set[int]]:
    """The risks a few thousand known episodes hold for the config: kept beside validate's summary where it is kept
    (one indexed read; the episodes the config did not judge read live), else read live, a correlated query a risk."""
    if config_id is None or not summary_available():
        return risk_sets(Episode.objects.filter(among(Episode, ids)), config_id, correlated=True)
    summary_and_risks_refresh()
    sets, unkept = kept_risk_sets(ids, config_id)
    if unkept:
        for name, members in risk_sets(Episode.objects.filter(among(Episode, unkept)), config_id,
                                       correlated=True).items():
            sets[name] |= members
    return sets


def _chunk(ids: list[int], judge_config: JudgeConfig | None, names: bool = True) -> Chunk:
    """A stretch of the order with what decides each episode: the rows, verifier results and (when asked) risks of
    only the episodes some source can approve (the config's judged successes and the final labels' successes: any
    other episode no source selects nor counts), about half of those the stretch holds."""
    finals = {pk: (verdict, adjudicated) for pk, verdict, adjudicated in FinalLabel.objects.filter(
        among(FinalLabel, ids, "episode_id")).values_list("episode_id", "verdict", "adjudicated")}
    judge_yes = set() if judge_config is None else set(
        Judgment.objects.filter(among(Judgment, ids, "episode_id"), config=judge_config,
                                verdict=Judgment.Verdict.SUCCESS).values_list("episode_id", flat=True))
    human_yes = {pk for pk, (verdict, _) in finals.items() if verdict == LabelVerdict.SUCCESS}
    approvable = [pk for pk in ids if pk in judge_yes or pk in human_yes]
    found = _chunk_rows(approvable, names=names)
    failed = set(VerifierResult.objects.filter(among(VerifierResult, approvable, "episode_id"), ok=False)
                 .values_list("episode_id", flat=True)) if approvable else set()
    return Chunk([found[pk] for pk in approvable if pk in found], finals, judge_yes, failed,
                 judge_config.pk if judge_config else None, len(ids))


def _chunk_rows(ids: list[int], *, names: bool = True) -> dict[int, ChunkRow]:
    """Each episode's row, its task's id read apart: joined in one query, PostgreSQL hashed every task of the
    database for a chunk's few thousand (a million tasks: most of a certify call), and the episodes' default order
    sorted the chunk by run for nothing. Without `names` the task ids and sites are left empty (a certificate reads
    neither): no task looked up, no site joined."""
    if not ids:
        return {}
    rows = list(Episode.objects.filter(among(Episode, ids)).order_by().values_list(
        "id", "task_order", "has_rows", "row_count", "content_hash", *(("task", "site__slug") if names else ())))
    if not names:
        return {pk: ChunkRow(pk, order, "", "", has_rows, count, content_hash)
                for pk, order, has_rows, count, content_hash in rows}
    tasks = dict(Task.objects.filter(among(Task, {row[5] for row in rows})).values_list("id", "task_id"))
    return {pk: ChunkRow(pk, order, tasks[task], site, has_rows, count, content_hash)
            for pk, order, has_rows, count, content_hash, task, site in rows}


def order_chunks(run: Run, judge_config: JudgeConfig | None, context: SelectContext | None = None,
                 wanted: Callable[[], int] | None = None) -> Iterator[Chunk]:
    """The run's episodes in export order, a chunk at a time (each read once per context, as it is first reached).
    `wanted()`, asked before a chunk nobody has read yet, is how many more positions the reader expects to need: the
    chunk is cut to that (at least MIN_CHUNK), so a selection that ends just past a chunk's edge does not read a
    whole chunk more (a certificate's population at 1M ended 257 positions into its third chunk of 8,192). The
    chunks' edges are kept in the context: every reader of one computation reads the same chunks."""
    order, _ = export_order(run, context)
    config_id = judge_config.pk if judge_config else None
    ends = _read(context, ("chunk ends", run.pk, config_id), list)
    start, size, index = 0, FIRST_CHUNK, 0
    while start < len(order):
        if index == len(ends):
            ends.append(min(len(order), start + (size if wanted is None else min(size, max(MIN_CHUNK, wanted())))))
        ids = [int(pk) for pk in order[start:ends[index]]]
        yield _read(context, ("chunk", run.pk, config_id, start),
                    lambda ids=ids: _chunk(ids, judge_config, names=SelectContext.named(context)))
        start, size, index = ends[index], min(LAST_CHUNK, size * 2), index + 1


def read_risk_sets(ids, *, run: Run, judge_config: JudgeConfig | None,
                   context: SelectContext | None = None) -> dict[str, set[int]]:
    """The risks these episodes hold: from the chunks whose risks the context has read already, the rest from the
    database (only these: a chunk's risks are tens of thousands of episodes, a certificate's a few thousand)."""
    wanted = set(ids)
    sets: dict[str, set[int]] = {name: set() for name in RISK_NAMES}
    config_id = judge_config.pk if judge_config else None
    chunks = [value for key, value in (context.reads.items() if context else ())
              if key[0] == "chunk" and key[1] == run.pk and key[2] == config_id and value._risks is not None]
    for chunk in chunks:
        covered = {r.id for r in chunk.rows} & wanted
        if covered:
            wanted -= covered
            for name, members in chunk.risks().items():
                sets[name] |= members & covered
    if wanted:
        for name, members in chunk_risk_sets(list(wanted), config_id).items():
            sets[name] |= members
    return sets
