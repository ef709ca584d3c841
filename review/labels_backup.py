"""Labels backed up and restored: every label, its history, the final labels and theirs, as JSON lines.

Rows are keyed by run name + task id + reviewer username, never by database ids, so a backup restores into a fresh
database once the runs are imported again. Restoring is idempotent (what is already there is left alone), keeps the
recorded times and authors, refuses rows whose episode or user is missing (listed with their line numbers) and never
overwrites a label that differs (a conflict, listed too). Every episode's rows are written under the same episode
lock as a reviewer's label post (review.services), one transaction per episode.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction

from review.models import FinalLabel, FinalLabelChange, Label, LabelChange
from review.services import episode_labels_lock
from taskgen.models import Episode

FORMAT = "taskgen-labels"
VERSION = 1
KINDS = ("label", "label_change", "final_label", "final_label_change")  # the order a restore applies them in


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _username(user) -> str | None:
    return user.get_username() if user else None


def _label_lines() -> Iterator[dict]:
    labels = Label.objects.select_related("episode__run", "episode__task", "reviewer").order_by("pk")
    for label in labels.iterator(chunk_size=2000):
        yield {"kind": "label", "run": label.episode.run.name, "task_id": label.episode.task.task_id,
               "reviewer": _username(label.reviewer), **label.as_record(),
               "created_at": _when(label.created_at), "updated_at": _when(label.updated_at)}
    changes = LabelChange.objects.select_related("label__episode__run", "label__episode__task", "label__reviewer",
                                                 "changed_by").order_by("pk")
    for change in changes.iterator(chunk_size=2000):
        episode = change.label.episode
        yield {"kind": "label_change", "run": episode.run.name, "task_id": episode.task.task_id,
               "reviewer": _username(change.label.reviewer), "changed_by": _username(change.changed_by),
               "before": change.before, "after": change.after, "changed_at": _when(change.changed_at)}


def _final_label_lines() -> Iterator[dict]:
    finals = FinalLabel.objects.select_related("episode__run", "episode__task", "decided_by").order_by("pk")
    for final in finals.iterator(chunk_size=2000):
        yield {"kind": "final_label", "run": final.episode.run.name, "task_id": final.episode.task.task_id,
               "verdict": final.verdict, "reason": final.reason, "adjudicated": final.adjudicated,
               "decided_by": _username(final.decided_by), "decided_at": _when(final.decided_at)}
    changes = FinalLabelChange.objects.select_related("episode__run", "episode__task", "changed_by").order_by("pk")
    for change in changes.iterator(chunk_size=2000):
        yield {"kind": "final_label_change", "run": change.episode.run.name, "task_id": change.episode.task.task_id,
               "changed_by": _username(change.changed_by), "before": change.before, "after": change.after,
               "changed_at": _when(change.changed_at)}


def labels_export_lines() -> Iterator[str]:
    """The backup, a JSON line at a time: a header, then labels, label history, final labels, final-label history."""
    yield json.dumps({"kind": "header", "format": FORMAT, "version": VERSION}) + "\n"
    for row in (*_label_lines(), *_final_label_lines()):
        yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


@dataclass
class RestoreReport:
    """What a restore did: counts of rows added and already there per kind, and every row it refused, with why."""

    added: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    unchanged: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    refused: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.refused

    def summary(self) -> str:
        counts = ", ".join(f"{k}: {self.added[k]} added, {self.unchanged[k]} already there" for k in KINDS)
        return f"{counts}; refused: {len(self.refused)}"


_REQUIRED = {"label": ("reviewer", "verdict", "created_at", "updated_at"),
             "label_change": ("reviewer", "changed_by", "after", "changed_at"),
             "final_label": ("verdict", "decided_at"),
             "final_label_change": ("changed_at",)}


def _parse(lines: Iterable[str], report: RestoreReport) -> list[tuple[int, dict]]:
    rows = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            report.refused.append(f"line {number}: not JSON ({exc.msg})")
            continue
        kind = row.get("kind") if isinstance(row, dict) else None
        if kind == "header":
            continue
        missing = [k for k in ("run", "task_id", *_REQUIRED.get(kind, ())) if row.get(k) in (None, "")]
        if kind not in _REQUIRED or missing:
            why = f"unknown kind {kind!r}" if kind not in _REQUIRED else f"missing {', '.join(missing)}"
            report.refused.append(f"line {number}: {why}")
            continue
        rows.append((number, row))
    return rows


def _episodes_of(rows: list[tuple[int, dict]]) -> dict[tuple[str, str], int]:
    runs = {row["run"] for _, row in rows}
    tasks = {row["task_id"] for _, row in rows}
    found = Episode.objects.filter(run__name__in=runs, task__task_id__in=tasks).values_list(
        "run__name", "task__task_id", "pk")
    return {(run, task): pk for run, task, pk in found}


def _usernames(row: dict) -> list[str]:
    return [row[k] for k in ("reviewer", "changed_by", "decided_by") if row.get(k)]


def _users_of(rows: list[tuple[int, dict]]) -> dict[str, object]:
    names = {name for _, row in rows for name in _usernames(row)}
    model = get_user_model()
    return {user.get_username(): user for user in model.objects.filter(**{f"{model.USERNAME_FIELD}__in": names})}


def _resolved(rows, episodes, users, report: RestoreReport) -> dict[int, list[dict]]:
    """Rows grouped by episode id; a row whose episode or user does not exist here is refused and listed."""
    by_episode: dict[int, list[dict]] = defaultdict(list)
    for number, row in rows:
        episode_id = episodes.get((row["run"], row["task_id"]))
        absent = [f"user {name!r}" for name in _usernames(row) if name not in users]
        if episode_id is None:
            absent.insert(0, f"episode {row['task_id']!r} of run {row['run']!r}")
        if absent:
            report.refused.append(f"line {number} ({row['kind']}): no {' and no '.join(absent)} in this database")
            continue
        by_episode[episode_id].append(row)
    return by_episode


def _stamp(model, pk: int, **times: str | None) -> None:
    """Put back recorded times (auto_now fields take the current time on save)."""
    model.objects.filter(pk=pk).update(**{k: datetime.fromisoformat(v) for k, v in times.items() if v})


def _label(episode_id: int, row: dict, users, report: RestoreReport) -> None:
    record = {k: row.get(k, d) for k, d in (("verdict", ""), ("part_overrides", []), ("note", ""), ("tags", []))}
    label = Label.objects.filter(episode_id=episode_id, reviewer=users[row["reviewer"]]).first()
    if label is not None:
        if label.as_record() == record:
            report.unchanged["label"] += 1
        else:
            report.refused.append(f"label of {row['task_id']!r} in {row['run']!r} by {row['reviewer']!r}: this "
                                  "database has a different label (kept, not overwritten)")
        return
    label = Label.objects.create(episode_id=episode_id, reviewer=users[row["reviewer"]], **record)
    _stamp(Label, label.pk, created_at=row["created_at"], updated_at=row["updated_at"])
    report.added["label"] += 1


def _label_change(episode_id: int, row: dict, users, report: RestoreReport) -> None:
    label = Label.objects.filter(episode_id=episode_id, reviewer=users[row["reviewer"]]).first()
    if label is None:
        report.refused.append(f"history of {row['task_id']!r} in {row['run']!r} by {row['reviewer']!r}: no label")
        return
    when = datetime.fromisoformat(row["changed_at"])
    changed_by = users[row["changed_by"]]
    if LabelChange.objects.filter(label=label, changed_by=changed_by, changed_at=when).exists():
        report.unchanged["label_change"] += 1
        return
    change = LabelChange.objects.create(label=label, changed_by=changed_by, before=row.get("before"),
                                        after=row["after"])
    _stamp(LabelChange, change.pk, changed_at=row["changed_at"])
    report.added["label_change"] += 1


def _final_label(episode_id: int, row: dict, users, report: RestoreReport) -> None:
    wanted = {"verdict": row["verdict"], "reason": row.get("reason", ""), "adjudicated": bool(row.get("adjudicated")),
              "decided_by": users.get(row.get("decided_by") or "")}
    final = FinalLabel.objects.filter(episode_id=episode_id).select_related("decided_by").first()
    if final is not None:
        same = all(getattr(final, k) == v for k, v in wanted.items())
        if same:
            report.unchanged["final_label"] += 1
        else:
            report.refused.append(f"final label of {row['task_id']!r} in {row['run']!r}: this database has a "
                                  "different final label (kept, not overwritten)")
        return
    final = FinalLabel.objects.create(episode_id=episode_id, **wanted)
    _stamp(FinalLabel, final.pk, decided_at=row["decided_at"])
    report.added["final_label"] += 1


def _final_label_change(episode_id: int, row: dict, users, report: RestoreReport) -> None:
    when = datetime.fromisoformat(row["changed_at"])
    changed_by = users.get(row.get("changed_by") or "")
    if FinalLabelChange.objects.filter(episode_id=episode_id, changed_by=changed_by, changed_at=when).exists():
        report.unchanged["final_label_change"] += 1
        return
    change = FinalLabelChange.objects.create(episode_id=episode_id, changed_by=changed_by, before=row.get("before"),
                                             after=row.get("after"))
    _stamp(FinalLabelChange, change.pk, changed_at=row["changed_at"])
    report.added["final_label_change"] += 1


_RESTORE = {"label": _label, "label_change": _label_change, "final_label": _final_label,
            "final_label_change": _final_label_change}


def labels_import(*, lines: Iterable[str]) -> RestoreReport:
    """Restore a backup made by `labels_export_lines` into this database (see the module's docstring)."""
    report = RestoreReport()
    rows = _parse(lines, report)
    users = _users_of(rows)
    by_episode = _resolved(rows, _episodes_of(rows), users, report)
    for episode_id in sorted(by_episode):
        with transaction.atomic():
            episode_labels_lock(episode_id)
            for row in sorted(by_episode[episode_id], key=lambda r: KINDS.index(r["kind"])):
                _RESTORE[row["kind"]](episode_id, row, users, report)
    return report
