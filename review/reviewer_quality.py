"""Reviewer quality (issue 22): episodes whose truth is known (a verifier decided them) are mixed into any queue at
its `check_rate`, unmarked, and each reviewer's accuracy on them is measured with an exact binomial interval.

- Serving: when a reviewer takes the next item, a check is due with probability `check_rate` (an unpredictable
  draw, so nothing tells a check from an ordinary item); it is an episode with a verifier result that the reviewer
  has neither labelled nor been checked on: one the queue covers if there is any (so it looks like the queue's items:
  an audit's are all judged successes), else one of the queue's runs, else any. In a queue that
  mixes checks the verifier stays hidden on every item until the reviewer labels it (`verifier_hidden`), and the
  queue page leaves the verifier out of its reasons, so a check looks like any other item.
- Answer: the reviewer's first label of the check's episode, read from the label's history (`LabelChange`, the
  record of its creation): changing the label later, with the verifier in view, changes nothing here, and a label
  post costs no extra query.
- Accuracy: correct first labels over decided ones (Unsure is counted apart, neither right nor wrong), with the
  Clopper-Pearson 95% interval (statsmodels' `proportion_confint`, method "beta"): exact, never narrower than the
  evidence allows, as a few dozen checks call for.
- Below a chosen accuracy: `reviewers_below(accuracy=...)` names the reviewers (their labels are flagged in
  adjudication), and `final_verdicts_trusted(...)` gives the final-label rule over the labels of everyone else, for
  a certificate that leaves such labels out.
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, Max, Min, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from review import queues
from review.final_label_rule import final_verdict_of_labels
from review.models import (
    FinalLabel,
    Label,
    LabelChange,
    LabelVerdict,
    Queue,
    QueueMember,
    Reservation,
    ReviewerCheck,
)
from taskgen.models import Episode, VerifierResult

BASES = {"estimate": "its accuracy is below", "upper": "even the top of its 95% interval is below"}
_DECIDED = (LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS)
_draw = random.SystemRandom()  # unpredictable, so a reviewer cannot learn which item is a check


class QualityError(ValueError):
    """A check rate or an accuracy that is not a share between 0 and 1 (the message says what was given)."""


def share_check(value: object, *, what: str, zero_ok: bool) -> float:
    """A share written 0.1 or 10%, checked to lie in [0, 1] ((0, 1] when zero is not allowed)."""
    text = str(value).strip()
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise QualityError(f"{what} must be a share such as 0.1 or 10%, not {text!r}") from None
    if not (0 <= share <= 1) or (share == 0 and not zero_ok):
        raise QualityError(f"{what} must be {'between 0' if zero_ok else 'above 0 and at most'} and 1, not {text}")
    return share


def queue_check_rate_set(*, queue: Queue, rate: object) -> Queue:
    """Set the share of a queue's served items that are known-truth checks (0: none)."""
    queue.check_rate = share_check(rate, what="the check rate", zero_ok=True)
    queue.save(update_fields=["check_rate"])
    return queue


def verifier_hidden(*, queue: Queue | None, can_review: bool, labelled: bool) -> bool:
    """Whether the episode page hides the verifier: in a queue that mixes checks, until the reviewer labels."""
    return bool(queue and queue.check_rate > 0 and can_review and not labelled)


def check_due(queue: Queue, draw: random.Random | None = None) -> bool:
    """Whether the next item served from this queue is a check (probability `check_rate`)."""
    return queue.check_rate > 0 and (draw or _draw).random() < queue.check_rate


def check_held(*, queue: Queue, reviewer) -> Episode | None:
    """The check this reviewer holds in this queue (reserved, not labelled), so a reload serves it again."""
    unlabelled = ReviewerCheck.objects.filter(reviewer=reviewer).exclude(
        Exists(Label.objects.filter(episode=OuterRef("episode_id"), reviewer=reviewer))).values("episode_id")
    held = Reservation.objects.filter(queue=queue, reviewer=reviewer, expires_at__gt=timezone.now(),
                                      episode_id__in=unlabelled).values("episode_id")
    return Episode.objects.only("id").filter(pk__in=held).order_by("pk").first()


def _pool(queue: Queue, reviewer) -> QuerySet[Episode]:
    known = Episode.objects.filter(Exists(VerifierResult.objects.filter(episode=OuterRef("pk")))).exclude(
        Exists(Label.objects.filter(episode=OuterRef("pk"), reviewer=reviewer))).exclude(
        Exists(ReviewerCheck.objects.filter(episode=OuterRef("pk"), reviewer=reviewer))).exclude(
        Exists(Reservation.objects.filter(queue=queue, episode=OuterRef("pk"), expires_at__gt=timezone.now())))
    in_scope = known.filter(pk__in=queues.queue_scope(queue).order_by().values("pk"))
    if in_scope.exists():  # episodes the queue itself covers look most like its items (an audit's are all SUCCESS)
        return in_scope
    runs = [queue.run_id] if queue.run_id else [int(r) for r in (queue.filters or {}).get("runs") or []]
    if not runs and queue.has_members:
        runs = list(QueueMember.objects.filter(queue=queue).values_list("episode__run_id", flat=True).distinct())
    scoped = known.filter(run_id__in=runs) if runs else known
    return scoped if not runs or scoped.exists() else known


def check_candidate(*, queue: Queue, reviewer, draw: random.Random | None = None) -> Episode | None:
    """A known-truth episode to serve this reviewer as a check, drawn at random from the pool (two indexed reads,
    not a shuffle of the whole pool), or None when there is none."""
    pool = _pool(queue, reviewer).only("id")
    bounds = pool.aggregate(low=Min("pk"), high=Max("pk"))
    if bounds["low"] is None:
        return None
    start = (draw or _draw).randint(bounds["low"], bounds["high"])
    return pool.filter(pk__gte=start).order_by("pk").first() or pool.filter(pk__lt=start).order_by("-pk").first()


def check_open(*, queue: Queue, episode: Episode, reviewer) -> ReviewerCheck:
    """Record that this episode was served to the reviewer as a check, with the verifier's result now."""
    truth = VerifierResult.objects.filter(episode=episode).values_list("ok", flat=True).get()
    check, _ = ReviewerCheck.objects.get_or_create(episode=episode, reviewer=reviewer,
                                                   defaults={"queue": queue, "truth": truth})
    return check


def _first_label() -> Subquery:
    """The verdict of the reviewer's first label of the check's episode (the history's first record), or None."""
    first = (LabelChange.objects.filter(label__episode_id=OuterRef("episode_id"), label__reviewer_id=OuterRef(
        "reviewer_id")).order_by("changed_at", "id").annotate(verdict=KeyTextTransform("verdict", "after")))
    return Subquery(first.values("verdict")[:1])


@dataclass(frozen=True)
class ReviewerAccuracy:
    """One reviewer's record on known-truth checks."""

    reviewer_id: int
    username: str
    served: int
    unanswered: int
    unsure: int
    decided: int
    correct: int
    accuracy: float | None
    low: float | None
    high: float | None

    def below(self, accuracy: float, basis: str = "estimate") -> bool:
        """Below `accuracy`: by the estimate, or (basis "upper") even by the top of the interval; never without a
        decided check (nothing is known of the reviewer yet)."""
        if self.accuracy is None:
            return False
        return (self.high if basis == "upper" else self.accuracy) < accuracy


def _interval(correct: int, decided: int) -> tuple[float | None, float | None]:
    if not decided:
        return None, None
    from statsmodels.stats.proportion import proportion_confint  # loads scipy.stats: only when a page needs it

    low, high = proportion_confint(correct, decided, alpha=0.05, method="beta")
    return round(float(low), 3), round(float(high), 3)


def reviewer_accuracy(*, intervals: bool = True) -> list[ReviewerAccuracy]:
    """Every checked reviewer's accuracy on known-truth checks, by username (one query, summed here); `intervals=False`
    skips the intervals (low and high None) where only the estimates are read."""
    counts: dict[tuple[int, str], Counter] = defaultdict(Counter)
    rows = ReviewerCheck.objects.annotate(first=_first_label()).values_list("reviewer_id", "reviewer__username",
                                                                            "truth", "first")
    for reviewer_id, username, truth, first in rows:
        tally = counts[(reviewer_id, username)]
        tally["served"] += 1
        tally["unanswered" if first is None else "unsure" if first == LabelVerdict.UNSURE else "decided"] += 1
        tally["correct"] += first in _DECIDED and (first == LabelVerdict.SUCCESS) == truth
    return [_accuracy(reviewer_id, username, tally, intervals)
            for (reviewer_id, username), tally in sorted(counts.items(), key=lambda item: item[0][1])]


def _accuracy(reviewer_id: int, username: str, tally: Counter, intervals: bool) -> ReviewerAccuracy:
    decided, correct = tally["decided"], tally["correct"]
    low, high = _interval(correct, decided if intervals else 0)
    return ReviewerAccuracy(reviewer_id=reviewer_id, username=username, served=tally["served"],
                            unanswered=tally["unanswered"], unsure=tally["unsure"], decided=decided, correct=correct,
                            accuracy=round(correct / decided, 3) if decided else None, low=low, high=high)


def reviewers_below(*, accuracy: float | None = None, basis: str = "estimate") -> set[int]:
    """The ids of the reviewers whose accuracy on known-truth checks is below `accuracy` (default: the setting
    TASKGEN_REVIEWER_MIN_ACCURACY); basis "upper": only those below it even at the top of their 95% interval.
    A reviewer with no decided check is never below: nothing is known of them."""
    threshold = settings.REVIEWER_MIN_ACCURACY if accuracy is None else accuracy
    if basis not in BASES:
        raise QualityError(f"unknown basis {basis!r}: use {', '.join(BASES)}")
    rows = reviewer_accuracy(intervals=basis == "upper")
    return {row.reviewer_id for row in rows if row.below(threshold, basis)}


def final_verdicts_trusted(*, episode_ids: list[int], accuracy: float | None = None,
                           basis: str = "estimate") -> dict[int, str | None]:
    """Each episode's final verdict with the labels of reviewers below `accuracy` left out: an adjudicator's
    decision stands; otherwise the final-label rule (`final_verdict_of_labels`) over the other reviewers' labels
    (None: none left, or they disagree). For a certificate that must not rest on such labels."""
    flagged = reviewers_below(accuracy=accuracy, basis=basis)
    decided = dict(FinalLabel.objects.filter(episode_id__in=episode_ids, adjudicated=True)
                   .values_list("episode_id", "verdict"))
    verdicts: dict[int, list[str]] = {pk: [] for pk in episode_ids}
    for episode_id, reviewer_id, verdict in Label.objects.filter(episode_id__in=episode_ids).values_list(
            "episode_id", "reviewer_id", "verdict"):
        if reviewer_id not in flagged:
            verdicts[episode_id].append(verdict)
    return {pk: decided.get(pk) or final_verdict_of_labels(verdicts[pk]) for pk in episode_ids}
