"""Reviewer quality (issue 22): episodes whose truth is known (a verifier decided them) are mixed into any queue at
its `check_rate`, unmarked, and each reviewer's accuracy on them is measured with an exact binomial interval.

- Serving: when a reviewer takes the next item, a check is due with probability `check_rate` (an unpredictable
  draw, so nothing tells a check from an ordinary item); it is an episode with a verifier result that the reviewer
  has neither labelled nor been checked on: one the queue covers if there is any (so it looks like the queue's items:
  an audit's are all judged successes), else one of the queue's runs, else any. In a queue that
  mixes checks the verifier stays hidden on every item until the reviewer labels it (`verifier_hidden`), and the
  queue page leaves the verifier out of its reasons, so a check looks like any other item.
- Answer and accuracy: `taskgen/labels/quality.py` (the reviewer's first label of the check's episode, read from the
  label's history; correct over decided, with the Clopper-Pearson interval; `reviewers_below`, whose labels are
  flagged in adjudication; `final_verdicts_trusted` for a certificate that leaves them out).
"""
from __future__ import annotations

import random

from django.db.models import Exists, Max, Min, OuterRef, QuerySet
from django.utils import timezone

from review import queues
from review.models import Queue, QueueMember, Reservation
from taskgen.labels.quality import share_check
from taskgen.models import Episode, Label, LabelVerdict, ReviewerCheck, VerifierResult

BASES = {"estimate": "its accuracy is below", "upper": "even the top of its 95% interval is below"}
_DECIDED = (LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS)
_draw = random.SystemRandom()  # unpredictable, so a reviewer cannot learn which item is a check


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
    return queues.first_reserved(Reservation.objects.filter(queue=queue, reviewer=reviewer,
                                                            expires_at__gt=timezone.now(), episode_id__in=unlabelled))


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
                                                   defaults={"queue_id": queue.pk, "truth": truth})
    return check


