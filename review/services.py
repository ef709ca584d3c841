"""Writes of the review pages: a reviewer's label (through taskgen.labels.write, which keeps its history and the final
label), queues and reservations. The final-label rule and its locking are described in taskgen/labels/write.py.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from review import queues
from review.models import Queue, QueueMember, Reservation
from review.reviewer_quality import check_candidate, check_due, check_held, check_open
from taskgen.labels.fields import (
    QUEUE_NAME_MAX,
    ReviewError,
    review_text,
)
from taskgen.labels.write import label_write
from taskgen.models import Episode, JudgeConfig, Judgment, Label, Run
from taskgen.triage.filters import EpisodeFilter, FilterError, condition, episode_filter_parse


@transaction.atomic
def label_set(*, episode: Episode, reviewer, verdict: str, part_overrides: list[int] | None = None,
              note: str = "", tags: list[str] | None = None) -> Label:
    """The reviewer labels the episode (`taskgen.labels.write.label_write`: its history and the final label kept);
    labelling gives back the reviewer's reservation of the episode. `part_overrides` are indexes into the parts of
    the judgment shown beside the label form (the queue's judge config's, else the first by provider and model)."""
    label, changed = label_write(episode=episode, reviewer=reviewer, verdict=verdict, part_overrides=part_overrides,
                                 note=note, tags=tags)
    if changed:
        Reservation.objects.filter(episode=episode, reviewer=reviewer).delete()
    return label


BUILTIN_QUEUES = [
    (Queue.Kind.FALSE_POSITIVE, "False-positive audit", False),
    (Queue.Kind.DISAGREE, "Judge and verifier disagree", False),
    (Queue.Kind.INCONSISTENT, "Verdict inconsistent with its parts", False),
    (Queue.Kind.NO_VERDICT, "No verdict", False),
]


def queues_builtin_ensure() -> None:
    """Give every run its own built-in queues (cheap when they exist: one query)."""
    have = set(Queue.objects.filter(builtin=True).values_list("run_id", "kind"))
    for run_id in Run.objects.order_by("pk").values_list("pk", flat=True):
        for kind, name, blind in BUILTIN_QUEUES:
            if (run_id, kind) in have:
                continue
            try:
                with transaction.atomic():
                    Queue.objects.create(kind=kind, name=name, builtin=True, blind=blind, run_id=run_id,
                                         filters={"runs": [run_id]})
            except IntegrityError:
                pass  # another request made it at the same moment


FILTER_QUEUE_KINDS = (Queue.Kind.FILTER, Queue.Kind.FALSE_POSITIVE, Queue.Kind.DISAGREE, Queue.Kind.INCONSISTENT,
                      Queue.Kind.NO_VERDICT)


def _checked_filter(filters, judge_config_id: int | None) -> EpisodeFilter:
    try:
        return episode_filter_parse(filters, config_id=judge_config_id)
    except FilterError as exc:
        raise ReviewError(str(exc)) from exc


def queue_create_from_filters(*, name: str, filters, user, labels_needed: int = 1, blind: bool = False,
                              judge_config_id: int | None = None, kind: str = Queue.Kind.FILTER) -> Queue:
    """Save a filter (taskgen/triage/filters.py: runs, sites, kind, verdicts, verifier, label state, ...) as a
    queue of every matching episode, or as an audit queue (false-positive audit, ...) over those episodes.
    Unknown values (a site or run that does not exist) are refused, never saved."""
    _check_queue_args(name=name, labels_needed=labels_needed, judge_config_id=judge_config_id)
    if kind not in FILTER_QUEUE_KINDS:
        raise ReviewError(f"unknown queue kind {kind!r}")
    checked = _checked_filter(filters, judge_config_id)
    return Queue.objects.create(name=name.strip(), kind=kind, filters=checked.as_stored(), created_by=user,
                                labels_needed=labels_needed, blind=blind, judge_config_id=judge_config_id)


@transaction.atomic
def queue_create_from_episodes(*, name: str, episode_ids: list[int], user, labels_needed: int = 1,
                               blind: bool = False) -> Queue:
    """A queue of exactly these episodes, in this order (validate links "review these false positives" here)."""
    _check_queue_args(name=name, labels_needed=labels_needed)
    ordered = list(dict.fromkeys(int(i) for i in episode_ids))
    if not ordered:
        raise ReviewError("no episodes given: there is nothing to review")
    found = set(Episode.objects.filter(pk__in=ordered).values_list("pk", flat=True))
    if missing := [i for i in ordered if i not in found]:
        raise ReviewError(f"no such episodes: {', '.join(map(str, missing[:10]))}")
    queue = Queue.objects.create(name=name.strip(), kind=Queue.Kind.EPISODES, created_by=user,
                                 labels_needed=labels_needed, blind=blind)
    QueueMember.objects.bulk_create(
        QueueMember(queue=queue, episode_id=e, position=n) for n, e in enumerate(ordered))
    return queue


@transaction.atomic
def queue_create_sample(*, name: str, per_verdict: int, user, judge_config_id: int | None = None,
                        filters: dict | None = None, labels_needed: int = 1, blind: bool = True) -> Queue:
    """A random sample stratified by judge verdict (per_verdict from each), fixed by settings.SAMPLE_SEED."""
    _check_queue_args(name=name, labels_needed=labels_needed, judge_config_id=judge_config_id)
    if per_verdict < 1:
        raise ReviewError("a sample needs at least one episode per verdict")
    checked = _checked_filter(filters or {}, judge_config_id)
    queue = Queue.objects.create(name=name.strip(), kind=Queue.Kind.SAMPLE, created_by=user,
                                 filters=checked.as_stored(), sample_size=per_verdict, labels_needed=labels_needed,
                                 blind=blind, judge_config_id=judge_config_id)
    population: dict[str, list[int]] = {}
    scope = Episode.objects.filter(condition(checked))
    for stratum in queues.SAMPLE_STRATA:
        judged = Judgment.objects.filter(verdict=stratum)
        if judge_config_id:
            judged = judged.filter(config_id=judge_config_id)
        population[stratum] = list(scope.filter(pk__in=judged.values("episode_id")).values_list("pk", flat=True))
    drawn = queues.sample_draw(population=population, per_stratum=per_verdict)
    queue.sample_population = {stratum: len(ids) for stratum, ids in population.items()}
    queue.save(update_fields=["sample_population"])
    QueueMember.objects.bulk_create(
        QueueMember(queue=queue, episode_id=e, stratum=s, position=n) for n, (e, s) in enumerate(drawn))
    return queue


def _check_queue_args(*, name: str, labels_needed: int, judge_config_id: int | None = None) -> None:
    if not review_text(field="name", value=name, max_length=QUEUE_NAME_MAX).strip():
        raise ReviewError("give the queue a name")
    if not 1 <= labels_needed <= 10:
        raise ReviewError("labels per episode (K) must be between 1 and 10")
    if judge_config_id and not JudgeConfig.objects.filter(pk=judge_config_id).exists():
        raise ReviewError(f"no judge config with id {judge_config_id}")


def queue_take_next(*, queue: Queue, reviewer, skip: int | None = None) -> Episode | None:
    """Reserve the next open episode of the queue for this reviewer, or None when nothing is left for them.

    The reviewer's own live reservation comes back first (a reload does not skip an item). `skip` is the episode the
    reviewer moves on from without labelling: its reservation is given back and it is not offered this time. Two
    reviewers asking at once get different episodes: on PostgreSQL the candidate row is locked with SKIP LOCKED;
    elsewhere the reservation's unique (queue, episode) constraint and a conditional update decide who wins.
    """
    if skip:
        Reservation.objects.filter(queue=queue, reviewer=reviewer, episode_id=skip).delete()
    held = Reservation.objects.filter(queue=queue, reviewer=reviewer, expires_at__gt=timezone.now()).filter(
        episode__in=queues.queue_available(queue, reviewer).values("pk"))
    # the caller only needs the id (to open the page): never the episode's large evidence columns
    if held_episode := queues.first_reserved(held):
        return held_episode
    if held_check := check_held(queue=queue, reviewer=reviewer):
        return held_check
    if check_due(queue) and (check := _check_serve(queue=queue, reviewer=reviewer)):
        return check
    for _attempt in range(20):
        episode = _claim_one(queue=queue, reviewer=reviewer, skip=skip)
        if episode is not False:
            return episode
    return None


def _check_serve(*, queue: Queue, reviewer) -> Episode | None:
    """Reserve a known-truth check for the reviewer in this queue (review/reviewer_quality.py), or None."""
    episode = check_candidate(queue=queue, reviewer=reviewer)
    if episode is None:
        return None
    with transaction.atomic():
        # the episode's row first, as an ordinary take locks it: a reviewer taking it as a queue item meanwhile is
        # skipped past, never waited for (waiting here while they wait on this reservation was a deadlock)
        if _lockable(Episode.objects.filter(pk=episode.pk).only("id")).first() is None:
            return None
        if not _reserve(queue=queue, episode=episode, reviewer=reviewer):
            return None  # another reviewer reserved it this instant: serve an ordinary item instead
        check_open(queue=queue, episode=episode, reviewer=reviewer)
    return episode


def _claim_one(*, queue: Queue, reviewer, skip: int | None):
    """One try at reserving an item: the episode, None when the queue is empty for this reviewer, False on a race."""
    available = queues.queue_available(queue, reviewer).exclude(pk=skip or 0).only("id")
    with transaction.atomic():
        episode = next(filter(None, (_lockable(part).first() for part in queues.queue_in_order(queue, available))),
                       None)
        if episode is None:
            return None
        return episode if _reserve(queue=queue, episode=episode, reviewer=reviewer) else False


def _lockable(candidates):
    """On PostgreSQL, candidate rows another reviewer is taking right now are skipped, not waited for."""
    if connection.features.has_select_for_update_skip_locked:
        return candidates.select_for_update(skip_locked=True, of=("self",))
    return candidates


_RESERVE_SQL = """
INSERT INTO review_reservation (queue_id, episode_id, reviewer_id, expires_at, created_at)
VALUES (%(queue)s, %(episode)s, %(reviewer)s, %(until)s, %(now)s)
ON CONFLICT (queue_id, episode_id) DO UPDATE SET reviewer_id = excluded.reviewer_id, expires_at = excluded.expires_at
WHERE review_reservation.expires_at <= %(now)s OR review_reservation.reviewer_id = %(reviewer)s
RETURNING id"""


def _reserve(*, queue: Queue, episode: Episode, reviewer) -> bool:
    """Reserve the item, or take over an expired reservation (or our own) only if it is still expired when we
    write: one conditional upsert (PostgreSQL and SQLite), no read-then-write race and no savepoint."""
    now = timezone.now()
    until = now + timedelta(minutes=settings.REVIEW_RESERVATION_MINUTES)
    adapt = connection.ops.adapt_datetimefield_value  # each backend's stored form (SQLite: naive UTC text)
    params = {"queue": queue.pk, "episode": episode.pk, "reviewer": reviewer.pk, "now": adapt(now),
              "until": adapt(until)}
    with connection.cursor() as cursor:
        cursor.execute(_RESERVE_SQL, params)
        return cursor.fetchone() is not None


def reservation_release(*, queue: Queue, reviewer) -> int:
    """Give back every item the reviewer holds in the queue (e.g. when they stop)."""
    return Reservation.objects.filter(queue=queue, reviewer=reviewer).delete()[0]
