"""Reviewers' accuracy on known-truth checks (episodes a verifier decided, served unmarked by the review queues:
review/reviewer_quality.py): the answer is the reviewer's first label of the check's episode, read from the label's
history (changing the label later, with the verifier in view, changes nothing here); accuracy is correct first labels
over decided ones (Unsure counted apart), with the Clopper-Pearson 95% interval (statsmodels' `proportion_confint`,
method "beta"). `reviewers_below` names the reviewers under a chosen accuracy; `final_verdicts_trusted` is the
final-label rule over everyone else's labels, for a certificate that must not rest on theirs.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.db.models.fields.json import KeyTextTransform

from taskgen.labels.rule import final_verdict_of_labels
from taskgen.models import FinalLabel, Label, LabelChange, LabelVerdict, ReviewerCheck

BASES = {"estimate": "its accuracy is below", "upper": "even the top of its 95% interval is below"}
_DECIDED = (LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS)


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
