"""The writes of a labels restore, once every line is checked: one write unit's episodes, each in its own
transaction under the same episode lock as a reviewer's label post (review.services), so a restore and live posts
take turns and neither loses anything. What is there already is left alone (idempotent), a label or final label
that differs is never overwritten, and each line's outcome is recorded in the transaction that writes it.
"""
from __future__ import annotations

from datetime import datetime
from itertools import groupby

from django.db import transaction

from review.labels_backup import KINDS
from review.models import FinalLabel, FinalLabelChange, Label, LabelChange
from review.services import ReviewError, episode_labels_lock, final_label_sync
from taskgen.models import Episode, LabelRestoreLine
from taskgen.stages.labels.check import USER_KEYS, final_label_same, users_named

Outcome = LabelRestoreLine.Outcome


class Refused(Exception):  # noqa: N818  (the line's outcome, not an error of the restore)
    """The line cannot be written as it stands now; the message says why."""


def _user(users: dict, name: str | None):
    if name and name not in users:
        raise Refused(f"no user {name!r} in this database")
    return users.get(name) if name else None


def _stamp(model, pk: int, **times: str) -> None:
    """Put back the recorded times (auto_now fields take the current time on save)."""
    model.objects.filter(pk=pk).update(**{k: datetime.fromisoformat(v) for k, v in times.items()})


def _label(episode_id: int, row: dict, users: dict) -> str:
    reviewer = _user(users, row["reviewer"])
    label = Label.objects.filter(episode_id=episode_id, reviewer=reviewer).first()
    if label is not None:
        if label.as_record() == row["record"]:
            return Outcome.UNCHANGED
        raise Refused("this database has a different label of this episode by this reviewer (kept, not overwritten)")
    label = Label.objects.create(episode_id=episode_id, reviewer=reviewer, **row["record"])
    _stamp(Label, label.pk, created_at=row["created_at"], updated_at=row["updated_at"])
    return Outcome.ADDED


def _label_change(episode_id: int, row: dict, users: dict) -> str:
    label = Label.objects.filter(episode_id=episode_id, reviewer=_user(users, row["reviewer"])).first()
    if label is None:
        raise Refused(f"no label of this episode by {row['reviewer']!r} to keep this history with")
    changed_by = _user(users, row["changed_by"])
    when = datetime.fromisoformat(row["changed_at"])
    if LabelChange.objects.filter(label=label, changed_by=changed_by, changed_at=when).exists():
        return Outcome.UNCHANGED
    change = LabelChange.objects.create(label=label, changed_by=changed_by, before=row["before"], after=row["after"])
    _stamp(LabelChange, change.pk, changed_at=row["changed_at"])
    return Outcome.ADDED


def _final_label(episode_id: int, row: dict, users: dict) -> str:
    decided_by = _user(users, row["decided_by"])
    final = FinalLabel.objects.filter(episode_id=episode_id).select_related("decided_by").first()
    if final is not None:
        if final_label_same(final, row):
            return Outcome.UNCHANGED
        raise Refused("this database has a different final label of this episode (kept, not overwritten)")
    final = FinalLabel.objects.create(episode_id=episode_id, decided_by=decided_by, **row["record"])
    _stamp(FinalLabel, final.pk, decided_at=row["decided_at"])
    return Outcome.ADDED


def _final_label_change(episode_id: int, row: dict, users: dict) -> str:
    changed_by = _user(users, row["changed_by"])
    when = datetime.fromisoformat(row["changed_at"])
    if FinalLabelChange.objects.filter(episode_id=episode_id, changed_by=changed_by, changed_at=when).exists():
        return Outcome.UNCHANGED
    change = FinalLabelChange.objects.create(episode_id=episode_id, changed_by=changed_by, before=row["before"],
                                             after=row["after"])
    _stamp(FinalLabelChange, change.pk, changed_at=row["changed_at"])
    return Outcome.ADDED


_WRITE = {"label": _label, "label_change": _label_change, "final_label": _final_label,
          "final_label_change": _final_label_change}


def _episode_write(episode_id: int, lines: list[LabelRestoreLine], users: dict) -> None:
    """Write one episode's lines (labels, then their history, then the final label and its history) and record each
    line's outcome, in one transaction under the episode's label lock."""
    with transaction.atomic():
        try:
            episode_labels_lock(episode_id)
        except ReviewError as exc:
            for x in lines:
                x.outcome, x.refusal = Outcome.REFUSED, str(exc)
        else:
            for x in lines:
                try:
                    x.outcome = _WRITE[x.kind](episode_id, x.row, users)
                except Refused as exc:
                    x.outcome, x.refusal = Outcome.REFUSED, str(exc)
            if any(x.kind in ("label", "final_label") and x.outcome == Outcome.ADDED for x in lines):
                # a reviewer may have labelled it since the backup: unless adjudicated, the rule over every label
                # decides the final label (with the backup alone, it is the backup's)
                final_label_sync(episode=Episode.objects.only("id").get(pk=episode_id))
        LabelRestoreLine.objects.bulk_update(lines, ["outcome", "refusal"])


def bucket_write(*, pipeline_run_id: int, bucket: int) -> dict:
    """Write the lines of one write unit that are not written yet (a try after a lost worker writes the rest);
    how many lines it wrote."""
    lines = list(LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, bucket=bucket,
                                                 outcome=Outcome.PENDING).order_by("episode_id", "line"))
    users = users_named({x.row[k] for x in lines for k in USER_KEYS if x.row.get(k)})
    for episode_id, group in groupby(lines, key=lambda x: x.episode_id):
        ordered = sorted(group, key=lambda x: (KINDS.index(x.kind), x.line))
        _episode_write(episode_id, ordered, users)
    return {"lines": len(lines)}
