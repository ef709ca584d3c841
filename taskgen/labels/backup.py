"""Labels backed up: every label, its history, the final labels and theirs, as JSON lines.

Rows are keyed by run name + task id + reviewer username, never by database ids, so a backup restores into a fresh
database once the runs are imported again. A restore runs on the engine (the `labels` stage,
taskgen/stages/labels/): every line is checked before any is written, each refused line is listed by its number,
and with all_or_nothing one refused line means nothing is written.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

from taskgen.models import FinalLabel, FinalLabelChange, Label, LabelChange

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
