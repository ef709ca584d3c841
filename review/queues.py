"""Which episodes a review queue holds, which are still open, and how far each queue and reviewer has got.

Every condition is an Exists/Subquery over Episode, never a join, so the same queryset can be locked with
`select_for_update(skip_locked=True)` on PostgreSQL (locking refuses DISTINCT and aggregates).
"""
from __future__ import annotations

import random
from collections import defaultdict

from django.conf import settings
from django.db.models import Case, Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.expressions import When
from django.db.models.functions import Coalesce
from django.utils import timezone

from review.certify_queue import certify_next_ids
from review.models import Queue, QueueMember, Reservation
from taskgen.models import Episode, Judgment, Label
from taskgen.triage.filters import EpisodeFilter, Facts, condition, judge_disagrees_with_verifier, stored_filter
from taskgen.triage.risk import risk_tiers

SAMPLE_STRATA = (Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS, Judgment.Verdict.NONE)


def _judgments(queue: Queue) -> QuerySet[Judgment]:
    """The judgments a queue reads: its judge config's, or every config's when it names none."""
    rows = Judgment.objects.filter(episode=OuterRef("pk"))
    return rows.filter(config_id=queue.judge_config_id) if queue.judge_config_id else rows


def _kind_condition(queue: Queue) -> Q:
    kind = queue.kind
    if kind == Queue.Kind.FALSE_POSITIVE:
        return Q(Exists(_judgments(queue).filter(verdict=Judgment.Verdict.SUCCESS)))
    if kind == Queue.Kind.DISAGREE:
        return judge_disagrees_with_verifier(Facts(queue.judge_config_id))
    if kind == Queue.Kind.INCONSISTENT:
        return Q(Exists(_judgments(queue).filter(inconsistent=True)))
    if kind == Queue.Kind.NO_VERDICT:
        return Q(Exists(_judgments(queue).filter(verdict=Judgment.Verdict.NONE)))
    if kind == Queue.Kind.CERTIFY:  # the design's next episodes (review/certify_queue.py)
        return Q(pk__in=certify_next_ids(queue))
    if queue.has_members:
        return Q(Exists(QueueMember.objects.filter(queue=queue, episode=OuterRef("pk"))))
    return Q()


def queue_filter(queue: Queue) -> EpisodeFilter:
    """The queue's saved filter (taskgen/triage/filters.py), reading its judge config's verdicts."""
    return stored_filter(queue.filters, config_id=queue.judge_config_id)


def queue_scope(queue: Queue) -> QuerySet[Episode]:
    """Every episode the queue covers, labelled or not: explicit lists in their order, the others in run and
    task-file order (the false-positive audit is read riskiest first through `queue_in_order`)."""
    episodes = Episode.objects.filter(_kind_condition(queue) & condition(queue_filter(queue)))
    if queue.has_members:
        position = QueueMember.objects.filter(queue=queue, episode=OuterRef("pk")).values("position")[:1]
        return episodes.annotate(position=Subquery(position)).order_by("position", "id")
    return episodes.order_by("run_id", "task_order", "id")


def queue_in_order(queue: Queue, episodes: QuerySet[Episode]) -> list[QuerySet[Episode]]:
    """The queue's episodes as parts to read in turn: the false-positive audit's risk tiers, riskiest first
    (taskgen/triage/risk.py), each in run and task-file order; one part for every other queue."""
    if queue.kind == Queue.Kind.FALSE_POSITIVE:
        return risk_tiers(episodes, queue.judge_config_id)
    if queue.kind == Queue.Kind.CERTIFY:
        ids = certify_next_ids(queue)
        return [episodes.alias(design_position=Case(*[When(pk=pk, then=n) for n, pk in enumerate(ids)],
                                                    default=len(ids))).order_by("design_position")] if ids else []
    return [episodes]


def queue_first(queue: Queue, episodes: QuerySet[Episode], limit: int) -> list[Episode]:
    """Up to `limit` of these episodes in the queue's order."""
    found: list[Episode] = []
    for part in queue_in_order(queue, episodes):
        if len(found) >= limit:
            break
        found += list(part[:limit - len(found)])
    return found


def _label_count() -> Coalesce:
    counted = (Label.objects.filter(episode=OuterRef("pk")).order_by().values("episode")
               .annotate(n=Count("id")).values("n"))
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def queue_open(queue: Queue) -> QuerySet[Episode]:
    """Episodes of the queue that still need labels (fewer than K)."""
    scope = queue_scope(queue)
    if queue.labels_needed == 1:  # the common case: "no label yet" is an anti-join, far cheaper than counting
        return scope.filter(~Exists(Label.objects.filter(episode=OuterRef("pk")))).annotate(label_count=Value(0))
    return scope.annotate(label_count=_label_count()).filter(label_count__lt=queue.labels_needed)


def queue_available(queue: Queue, reviewer) -> QuerySet[Episode]:
    """Open episodes this reviewer may take: not labelled by them, not held by someone else right now."""
    mine = Label.objects.filter(episode=OuterRef("pk"), reviewer=reviewer)
    held = Reservation.objects.filter(queue=queue, episode=OuterRef("pk"), expires_at__gt=timezone.now()).exclude(
        reviewer=reviewer)
    return queue_open(queue).filter(~Exists(mine), ~Exists(held))


def sample_episode_ids(queue: Queue) -> set[int]:
    """The episode ids of a sample queue (fixed by settings.SAMPLE_SEED, so validate can reuse it)."""
    return set(QueueMember.objects.filter(queue=queue).values_list("episode_id", flat=True))


def sample_strata(queue: Queue) -> dict[str, set[int]]:
    """A sample queue's episode ids per judge verdict (the strata), for weighting estimates on the validate page;
    `queue.sample_population` holds each stratum's size when the sample was drawn."""
    strata: dict[str, set[int]] = defaultdict(set)
    for episode_id, stratum in QueueMember.objects.filter(queue=queue).values_list("episode_id", "stratum"):
        strata[stratum].add(episode_id)
    return dict(strata)


def sample_draw(*, population: dict[str, list[int]], per_stratum: int,
                seed: int | None = None) -> list[tuple[int, str]]:
    """Draw up to `per_stratum` ids from each stratum with a fixed seed; the same input gives the same sample."""
    seed = settings.SAMPLE_SEED if seed is None else seed
    drawn: list[tuple[int, str]] = []
    for stratum in sorted(population):
        ids = sorted(population[stratum])
        rng = random.Random(f"{seed}:{stratum}")  # one stream per stratum: adding a stratum leaves others alone
        drawn += [(i, stratum) for i in rng.sample(ids, min(per_stratum, len(ids)))]
    return drawn


def queue_progress(queue: Queue) -> dict:
    """How far a queue is: total episodes, done (K labels), and labels per reviewer within it."""
    scope = queue_scope(queue).order_by()
    total = scope.count()
    if queue.labels_needed == 1:  # counting the labelled side lets the database start from the (smaller) labels
        done = scope.filter(Exists(Label.objects.filter(episode=OuterRef("pk")))).count()
    else:
        done = scope.annotate(label_count=_label_count()).filter(label_count__gte=queue.labels_needed).count()
    remaining = total - done
    per_reviewer = (Label.objects.filter(episode__in=scope.values("pk")).values("reviewer__username")
                    .annotate(n=Count("id")).order_by("-n", "reviewer__username"))
    return {"total": total, "done": done, "remaining": remaining, "percent": int(100 * done / total) if total else 0,
            "reviewers": [{"reviewer": r["reviewer__username"], "labels": r["n"]} for r in per_reviewer]}


def first_reserved(reservations: QuerySet[Reservation]) -> Episode | None:
    """The lowest-numbered episode among these reservations (only its id read), or None. Read from the reservations
    themselves, a reviewer's one or two: asked as the episodes whose id is among them, PostgreSQL walked the run's
    million episodes in id order looking for one when the reviewer held none (60 ms of every "take next")."""
    pk = reservations.order_by("episode_id").values_list("episode_id", flat=True).first()
    return None if pk is None else Episode.objects.only("id").filter(pk=pk).first()
