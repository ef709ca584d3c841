"""The writes of a labels restore, once every line is checked: one write unit's episodes, EPISODES_TOGETHER at a time
in one transaction holding their rows locked (in id order, the same lock as a reviewer's label post:
taskgen.labels.write), so a restore and live posts take turns and neither loses anything. What is there already is left
alone (idempotent), a label or final label that differs is never overwritten, and each line's outcome is recorded in
the transaction that writes it, so a unit done again writes nothing twice. Rows are made in bulk and their recorded
times put back after (auto_now fields take the current time when a row is made).
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db import connection, transaction

from taskgen.labels.backup import KINDS
from taskgen.labels.write import final_label_sync
from taskgen.models import Episode, FinalLabel, FinalLabelChange, Label, LabelChange, LabelRestoreLine
from taskgen.stages.labels.check import USER_KEYS, final_label_same, users_named

Outcome = LabelRestoreLine.Outcome
EPISODES_TOGETHER = 50  # episodes written in one transaction (a live post on one of them waits that long at most)


class Refused(Exception):  # noqa: N818  (the line's outcome, not an error of the restore)
    """The line cannot be written as the database stands; the message says why."""


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


class _Batch:
    """The label state of a few locked episodes, read once, and the rows to make; each line decided in memory."""

    def __init__(self, episode_ids: list[int], users: dict) -> None:
        self.users = users
        self.labels = {(lb.episode_id, lb.reviewer_id): lb for lb in Label.objects.filter(episode_id__in=episode_ids)}
        self.changes = set(LabelChange.objects.filter(label__episode_id__in=episode_ids).values_list(
            "label__episode_id", "label__reviewer_id", "changed_by_id", "changed_at"))
        self.finals = {f.episode_id: f for f in FinalLabel.objects.filter(episode_id__in=episode_ids)
                       .select_related("decided_by")}
        self.final_changes = set(FinalLabelChange.objects.filter(episode_id__in=episode_ids).values_list(
            "episode_id", "changed_by_id", "changed_at"))
        self.had_labels = {e for e, _ in self.labels} | set(self.finals)
        self.made: dict[type, list] = defaultdict(list)

    def user(self, name: str | None):
        if name and name not in self.users:
            raise Refused(f"no user {name!r} in this database")
        return self.users.get(name) if name else None

    def label(self, episode_id: int, row: dict) -> str:
        reviewer = self.user(row["reviewer"])
        label = self.labels.get((episode_id, reviewer.pk))
        if label is not None:
            if label.as_record() == row["record"]:
                return Outcome.UNCHANGED
            raise Refused("this database has a different label of this episode by this reviewer (kept, not "
                          "overwritten)")
        label = Label(episode_id=episode_id, reviewer=reviewer, **row["record"])
        label.times = {"created_at": _when(row["created_at"]), "updated_at": _when(row["updated_at"])}
        self.labels[(episode_id, reviewer.pk)] = label
        self.made[Label].append(label)
        return Outcome.ADDED

    def label_change(self, episode_id: int, row: dict) -> str:
        reviewer = self.user(row["reviewer"])
        label = self.labels.get((episode_id, reviewer.pk))
        if label is None:
            raise Refused(f"no label of this episode by {row['reviewer']!r} to keep this history with")
        changed_by, when = self.user(row["changed_by"]), _when(row["changed_at"])
        key = (episode_id, reviewer.pk, changed_by.pk, when)
        if key in self.changes:
            return Outcome.UNCHANGED
        self.changes.add(key)
        change = LabelChange(label=label, changed_by=changed_by, before=row["before"], after=row["after"])
        change.times = {"changed_at": when}
        self.made[LabelChange].append(change)
        return Outcome.ADDED

    def final_label(self, episode_id: int, row: dict) -> str:
        decided_by = self.user(row["decided_by"])
        final = self.finals.get(episode_id)
        if final is not None:
            if final_label_same(final, row):
                return Outcome.UNCHANGED
            raise Refused("this database has a different final label of this episode (kept, not overwritten)")
        final = FinalLabel(episode_id=episode_id, decided_by=decided_by, **row["record"])
        final.times = {"decided_at": _when(row["decided_at"])}
        self.finals[episode_id] = final
        self.made[FinalLabel].append(final)
        return Outcome.ADDED

    def final_label_change(self, episode_id: int, row: dict) -> str:
        changed_by, when = self.user(row["changed_by"]), _when(row["changed_at"])
        key = (episode_id, changed_by.pk if changed_by else None, when)
        if key in self.final_changes:
            return Outcome.UNCHANGED
        self.final_changes.add(key)
        change = FinalLabelChange(episode_id=episode_id, changed_by=changed_by, before=row["before"],
                                  after=row["after"])
        change.times = {"changed_at": when}
        self.made[FinalLabelChange].append(change)
        return Outcome.ADDED

    def flush(self, model) -> None:
        """Make the rows decided for one model, then put back their recorded times."""
        rows = self.made.pop(model, [])
        if model is LabelChange:
            for change in rows:
                change.label_id = change.label.pk  # labels made in this batch have their ids now
        model.objects.bulk_create(rows, batch_size=1000)
        if rows:
            _times_put_back(model, rows)


def _times_put_back(model, rows: list) -> None:
    """The rows' recorded times (`row.times`), in one UPDATE ... FROM (VALUES ...) per 500 rows (PostgreSQL and
    SQLite alike; Django's bulk_update builds a CASE per row and cost more than the rest of the restore)."""
    names = list(rows[0].times)
    quote, adapt = connection.ops.quote_name, connection.ops.adapt_datetimefield_value
    table = quote(model._meta.db_table)
    sets = ", ".join(f"{quote(name)} = v.column{n}" for n, name in enumerate(names, 2))
    row_sql = f"(CAST(%s AS bigint), {', '.join(['%s'] * len(names))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            chunk = rows[start:start + 500]
            params = [value for row in chunk for value in (row.pk, *(adapt(row.times[n]) for n in names))]
            # only quoted names and placeholders go into the text; every value is a parameter
            cursor.execute(f"UPDATE {table} SET {sets} FROM (VALUES {', '.join([row_sql] * len(chunk))}) AS v "  # noqa: S608
                           f"WHERE {table}.id = v.column1", params)


_FLUSHED = {"label": Label, "label_change": LabelChange, "final_label": FinalLabel,
            "final_label_change": FinalLabelChange}


def _refuse(lines: list[LabelRestoreLine], why: str) -> None:
    for x in lines:
        x.outcome, x.refusal = Outcome.REFUSED, why


def _episodes_write(groups: dict[int, list[LabelRestoreLine]], users: dict) -> None:
    """Write a few episodes' lines, kind by kind (labels before their history), and record each line's outcome, in
    one transaction holding the episodes' rows locked."""
    lines = [x for group in groups.values() for x in group]
    with transaction.atomic():
        locked = list(Episode.objects.select_for_update().filter(pk__in=list(groups)).order_by("pk")
                      .values_list("pk", flat=True))
        for episode_id in set(groups) - set(locked):
            _refuse(groups[episode_id], f"episode {episode_id} no longer exists")
        batch = _Batch(locked, users)
        for kind in KINDS:
            for x in (x for x in lines if x.kind == kind and x.outcome == Outcome.PENDING):
                try:
                    x.outcome = getattr(batch, kind)(x.episode_id, x.row)
                except Refused as exc:
                    _refuse([x], str(exc))
            batch.flush(_FLUSHED[kind])
        _final_labels_follow(groups, batch)
        _outcomes_record(lines)


def _outcomes_record(lines: list[LabelRestoreLine]) -> None:
    """Each line's outcome, in a statement per outcome (refused lines one by one, each with why)."""
    for outcome in (Outcome.ADDED, Outcome.UNCHANGED):
        LabelRestoreLine.objects.filter(pk__in=[x.pk for x in lines if x.outcome == outcome]).update(outcome=outcome)
    refused = [x for x in lines if x.outcome == Outcome.REFUSED]
    LabelRestoreLine.objects.bulk_update(refused, ["outcome", "refusal"], batch_size=1000)


def _final_labels_follow(groups: dict[int, list[LabelRestoreLine]], batch: _Batch) -> None:
    """Where the restore met labels or final labels already there, or refused some of an episode's lines, the final
    label (unless adjudicated) is the rule applied to the episode's labels now; elsewhere it is the backup's own."""
    for episode_id, group in groups.items():
        added = any(x.kind in ("label", "final_label") and x.outcome == Outcome.ADDED for x in group)
        mixed = episode_id in batch.had_labels or any(x.outcome == Outcome.REFUSED for x in group)
        if added and mixed:
            final_label_sync(episode=Episode(pk=episode_id))


def bucket_write(*, pipeline_run_id: int, bucket: int) -> dict:
    """Write the lines of one write unit that are not written yet (a try after a lost worker writes the rest);
    how many lines it wrote."""
    lines = list(LabelRestoreLine.objects.filter(pipeline_run_id=pipeline_run_id, bucket=bucket,
                                                 outcome=Outcome.PENDING).order_by("episode_id", "line"))
    users = users_named({x.row[k] for x in lines for k in USER_KEYS if x.row.get(k)})
    groups: dict[int, list[LabelRestoreLine]] = defaultdict(list)
    for x in lines:
        groups[x.episode_id].append(x)
    ids = sorted(groups)
    for start in range(0, len(ids), EPISODES_TOGETHER):
        _episodes_write({e: groups[e] for e in ids[start:start + EPISODES_TOGETHER]}, users)
    return {"lines": len(lines)}
