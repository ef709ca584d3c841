"""Writing labels: a reviewer's label (with its history) and the final label (by the rule after each label, or by an
adjudication, with its history).

The final human label (FinalLabel) is what validate, certificates and exports read. The rule,
`final_verdict_of_labels` (taskgen/labels/rule.py), kept by `label_write` and `final_label_adjudicate`:

- an adjudicated final label (an adjudicator's decision, with a reason) stands until an adjudicator changes it;
- otherwise, when every label of the episode has the same verdict (one label, or all agreeing), the final label
  follows that verdict (adjudicated=False) - an all-UNSURE episode gets final verdict UNSURE, which is no decision:
  it goes to adjudication (UNSURE_RULE, `final_label_state`, `needs_adjudication`);
- when labels disagree, the episode has no final label until an adjudicator decides.

Every write to an episode's labels or final label first locks the episode's row (a row that always exists), then
reads the labels as committed and writes. Two reviewers posting at the same moment therefore take turns, and the
second one sees the first one's label when it recomputes the final label: the final label is the rule applied to the
labels in the database after any interleaving of posts, edits, adjudications and restores.
"""
from __future__ import annotations

from django.db import transaction

from taskgen.labels.fields import ReviewError, final_label_record_clean, label_record_clean
from taskgen.labels.rule import final_verdict_of_labels
from taskgen.models import Episode, FinalLabel, FinalLabelChange, Label, LabelChange


def _episode_lock(episode_id: int) -> None:
    """Lock the episode's row for the rest of the transaction: every label write of one episode takes turns here.

    (On SQLite, whose transactions take the database's write lock when they begin, writers take turns anyway.)
    """
    if not Episode.objects.select_for_update().filter(pk=episode_id).exists():
        raise ReviewError(f"episode {episode_id} no longer exists")


def episode_labels_lock(episode_id: int) -> None:
    """Take the episode's label lock (see `_episode_lock`) for writers outside this module (labels restored from a
    backup), so they take turns with reviewers' posts."""
    _episode_lock(episode_id)


def _final_label_record(final: FinalLabel | None) -> dict | None:
    if final is None:
        return None
    return {"verdict": final.verdict, "adjudicated": final.adjudicated, "reason": final.reason,
            "decided_by": final.decided_by.get_username() if final.decided_by_id else None}


def _final_label_log(*, episode: Episode, before: dict | None, final: FinalLabel | None, user) -> None:
    after = _final_label_record(final)
    if before != after:
        FinalLabelChange.objects.create(episode=episode, changed_by=user, before=before, after=after)


def final_label_sync(*, episode: Episode, user=None) -> FinalLabel | None:
    """Bring the episode's final label in line with its committed labels (the caller holds the episode's lock)."""
    final = FinalLabel.objects.select_related("decided_by").filter(episode=episode).first()
    if final and final.adjudicated:
        return final
    before = _final_label_record(final)
    verdict = final_verdict_of_labels(Label.objects.filter(episode=episode).values_list("verdict", flat=True))
    if verdict is None:
        if final:
            final.delete()
        final = None
    elif final is None:
        final = FinalLabel.objects.create(episode=episode, verdict=verdict)
    elif final.verdict != verdict:
        final.verdict = verdict
        final.save(update_fields=["verdict", "decided_at"])
    _final_label_log(episode=episode, before=before, final=final, user=user)
    return final


def label_write(*, episode: Episode, reviewer, verdict: str, part_overrides: list[int] | None = None,
                note: str = "", tags: list[str] | None = None) -> tuple[Label, bool]:
    """Create or edit the reviewer's label of the episode, log the change, and keep the final label in sync; the
    label and whether it changed. Call it inside a transaction (the episode's lock lasts until it ends).

    `part_overrides` are indexes into the parts of the judgment shown beside the label form.
    """
    after = label_record_clean(verdict=verdict, part_overrides=part_overrides, note=note, tags=tags)
    _episode_lock(episode.pk)
    label = Label.objects.filter(episode=episode, reviewer=reviewer).first()
    before = label.as_record() if label else None
    if before == after:
        return label, False
    if label is None:
        label = Label(episode=episode, reviewer=reviewer)
    for field, value in after.items():
        setattr(label, field, value)
    label.save()
    LabelChange.objects.create(label=label, changed_by=reviewer, before=before, after=after)
    final_label_sync(episode=episode, user=reviewer)
    return label, True


@transaction.atomic
def final_label_adjudicate(*, episode: Episode, adjudicator, verdict: str, reason: str) -> FinalLabel:
    """An adjudicator settles the episode's final label; the reason is required and kept, with the decision's
    history."""
    decision = final_label_record_clean(verdict=verdict, reason=reason, adjudicated=True)
    _episode_lock(episode.pk)
    before = _final_label_record(FinalLabel.objects.select_related("decided_by").filter(episode=episode).first())
    final, _ = FinalLabel.objects.update_or_create(episode=episode, defaults={**decision, "decided_by": adjudicator})
    _final_label_log(episode=episode, before=before, final=final, user=adjudicator)
    return final
