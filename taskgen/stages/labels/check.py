"""The check of a labels restore, before anything is written: every line of the file (`lines_check`, a chunk of
lines per unit), then what only the whole file shows (`lines_verify`: a history entry with no label in the file or
the database, two lines giving one episode different labels). Each line is kept as a LabelRestoreLine: the values
to write and the write unit that writes them, or why it is refused.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from taskgen.models import Episode, FinalLabel, Label, LabelRestoreLine
from taskgen.stages.labels.rows import RowRefused, backup_line_parse

Outcome = LabelRestoreLine.Outcome
USER_KEYS = ("reviewer", "changed_by", "decided_by")


def file_lines(path: Path, *, first: int, count: int) -> Iterator[tuple[int, bytes]]:
    """Lines first .. first + count - 1 of the file (numbered from 1), as bytes."""
    with path.open("rb") as handle:
        yield from itertools.islice(enumerate(handle, 1), first - 1, first - 1 + count)


def _episodes_of(rows: list[dict]) -> dict[tuple[str, str], int]:
    runs, tasks = {r["run"] for r in rows}, {r["task_id"] for r in rows}
    found = Episode.objects.filter(run__name__in=runs, task__task_id__in=tasks).values_list(
        "run__name", "task__task_id", "pk")
    return {(run, task): pk for run, task, pk in found}


def users_named(names: set[str]) -> dict[str, object]:
    model = get_user_model()
    return {u.get_username(): u for u in model.objects.filter(**{f"{model.USERNAME_FIELD}__in": names})}


def _absent(row: dict, episode_id: int | None, users: dict) -> str:
    absent = [f"user {row[k]!r}" for k in USER_KEYS if row.get(k) and row[k] not in users]
    if episode_id is None:
        absent.insert(0, f"episode {row['task_id']!r} of run {row['run']!r}")
    return f"no {' and no '.join(absent)} in this database" if absent else ""


def _conflicts(lines: list[LabelRestoreLine]) -> None:
    """A label or final label that this database holds already, different: refused (kept, never overwritten)."""
    labels = [x for x in lines if x.kind == "label" and not x.refusal]
    finals = [x for x in lines if x.kind == "final_label" and not x.refusal]
    held = {(lb.episode_id, lb.reviewer.get_username()): lb.as_record() for lb in Label.objects.filter(
        episode_id__in={x.episode_id for x in labels}).select_related("reviewer")}
    for x in labels:
        record = held.get((x.episode_id, x.row["reviewer"]))
        if record is not None and record != x.row["record"]:
            x.refusal = "this database has a different label of this episode by this reviewer (kept, not overwritten)"
    decided = {f.episode_id: f for f in FinalLabel.objects.filter(
        episode_id__in={x.episode_id for x in finals}).select_related("decided_by")}
    for x in finals:
        final = decided.get(x.episode_id)
        if final is not None and not final_label_same(final, x.row):
            x.refusal = "this database has a different final label of this episode (kept, not overwritten)"


def final_label_same(final: FinalLabel, row: dict) -> bool:
    """Whether a final label in the database is the one a backup line gives."""
    record = row["record"]
    return (final.verdict, final.reason, final.adjudicated) == (record["verdict"], record["reason"],
                                                               record["adjudicated"]) and \
        (final.decided_by.get_username() if final.decided_by_id else None) == row.get("decided_by")


def lines_check(*, pipeline_run_id: int, path: Path, first: int, count: int, buckets: int) -> dict:
    """Check lines first .. first + count - 1 and keep each as a LabelRestoreLine (a try again replaces them);
    how many are good and how many refused."""
    lines, rows = [], []
    for number, data in file_lines(path, first=first, count=count):
        try:
            row = backup_line_parse(data)
        except RowRefused as exc:
            lines.append(LabelRestoreLine(line=number, kind=exc.kind, refusal=str(exc), outcome=Outcome.REFUSED))
            continue
        if row is not None:
            lines.append(LabelRestoreLine(line=number, kind=row["kind"], row=row))
            rows.append(row)
    episodes = _episodes_of(rows)
    users = users_named({r[k] for r in rows for k in USER_KEYS if r.get(k)})
    for x in lines:
        if x.row:
            x.episode_id = episodes.get((x.row["run"], x.row["task_id"]))
            x.refusal = _absent(x.row, x.episode_id, users)
    _conflicts([x for x in lines if x.row and not x.refusal])
    for x in lines:
        x.pipeline_run_id = pipeline_run_id
        x.outcome = Outcome.REFUSED if x.refusal else Outcome.PENDING
        x.bucket = None if x.refusal else x.episode_id % buckets
    with transaction.atomic():
        LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, line__gte=first,
                                        line__lt=first + count).delete()
        LabelRestoreLine.objects.bulk_create(lines, batch_size=1000)
    refused = sum(bool(x.refusal) for x in lines)
    return {"good": len(lines) - refused, "refused": refused}


def _refuse(pipeline_run_id: int, numbers: dict[int, str]) -> None:
    lines = list(LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, line__in=list(numbers)))
    for x in lines:
        x.refusal, x.outcome, x.bucket = numbers[x.line], Outcome.REFUSED, None
    LabelRestoreLine.objects.bulk_update(lines, ["refusal", "outcome", "bucket"], batch_size=1000)


def _differing_copies(good, kind: str, key) -> dict[int, str]:
    """Lines that give the same label (or final label) as an earlier line, different: refused."""
    first: dict[tuple, tuple[int, dict]] = {}
    refused = {}
    for number, row_kind, episode_id, row in good:
        if row_kind != kind:
            continue
        seen = first.setdefault((episode_id, key(row)), (number, row))
        if seen[0] != number and {k: v for k, v in seen[1].items() if not k.endswith("_at")} != \
                {k: v for k, v in row.items() if not k.endswith("_at")}:
            refused[number] = f"line {seen[0]} of this file gives this {kind.replace('_', ' ')} differently"
    return refused


def _orphan_histories(pipeline_run_id: int, labels: list) -> dict[int, str]:
    """History lines whose label is neither a good line of this file nor in this database: refused."""
    in_file = {(e, row["reviewer"]) for _, kind, e, row in labels if kind == "label"}
    histories = _pending(pipeline_run_id, ["label_change"]).values_list("line", "episode_id", "row__reviewer")
    wanted = [(n, e, who) for n, e, who in histories if (e, who) not in in_file]
    held = set(Label.objects.filter(episode_id__in={e for _, e, _ in wanted}).values_list(
        "episode_id", "reviewer__" + get_user_model().USERNAME_FIELD))
    return {n: f"no label of this episode by {who!r} in this file or this database" for n, e, who in wanted
            if (e, who) not in held}


def _pending(pipeline_run_id: int, kinds: list[str]):
    return LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, outcome=Outcome.PENDING,
                                           kind__in=kinds).order_by("line")


def lines_verify(*, pipeline_run_id: int) -> int:
    """What only the whole file shows (after every line is checked), refused with why; how many lines are refused
    in all."""
    good = list(_pending(pipeline_run_id, ["label", "final_label"]).values_list("line", "kind", "episode_id", "row"))
    refused = _differing_copies(good, "label", lambda row: row["reviewer"])
    refused.update(_differing_copies(good, "final_label", lambda row: None))
    refused.update(_orphan_histories(pipeline_run_id, [g for g in good if g[0] not in refused]))
    _refuse(pipeline_run_id, refused)
    return LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, outcome=Outcome.REFUSED).count()
