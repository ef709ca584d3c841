"""Writes of the review side: labels (with their audit log and the final label), adjudication, queues, reservations.

The final human label (FinalLabel) is what validate and exports read. The rule, `final_verdict_of_labels`, kept by
`label_set` and `final_label_adjudicate`:

- an adjudicated final label (an adjudicator's decision, with a reason) stands until an adjudicator changes it;
- otherwise, when every label of the episode has the same verdict (one label, or all agreeing), the final label
  follows that verdict (adjudicated=False) - an all-UNSURE episode gets final verdict UNSURE, which is no decision:
  it goes to adjudication (UNSURE_RULE, `final_label_state`, `needs_adjudication`);
- when labels disagree, the episode has no final label until an adjudicator decides.

Every write to an episode's labels or final label first locks the episode's row (a row that always exists), then
reads the labels as committed and writes. Two reviewers posting at the same moment therefore take turns, and the
second one sees the first one's label when it recomputes the final label: the final label is the rule applied to the
labels in the database after any interleaving of posts, edits and adjudications.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from review import queues
from review.episode_filters import EpisodeFilter, FilterError, condition, episode_filter_parse
from review.final_label_rule import final_verdict_of_labels
from review.label_fields import (
    QUEUE_NAME_MAX,
    ReviewError,
    final_label_record_clean,
    label_record_clean,
    review_text,
)
from review.models import (
    FinalLabel,
    FinalLabelChange,
    Label,
    LabelChange,
    Queue,
    QueueMember,
    Reservation,
)
from review.reviewer_quality import check_candidate, check_due, check_held, check_open
from taskgen.models import Episode, JudgeConfig, Judgment, Run


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


@transaction.atomic
def label_set(*, episode: Episode, reviewer, verdict: str, part_overrides: list[int] | None = None,
              note: str = "", tags: list[str] | None = None) -> Label:
    """Create or edit the reviewer's label of the episode, log the change, and keep the final label in sync.

    `part_overrides` are indexes into the parts of the judgment shown beside the label form (the queue's judge
    config's, else the first by provider and model). Labelling gives back the reviewer's reservation of the episode.
    """
    after = label_record_clean(verdict=verdict, part_overrides=part_overrides, note=note, tags=tags)
    _episode_lock(episode.pk)
    label = Label.objects.filter(episode=episode, reviewer=reviewer).first()
    before = label.as_record() if label else None
    if before == after:
        return label
    if label is None:
        label = Label(episode=episode, reviewer=reviewer)
    for field, value in after.items():
        setattr(label, field, value)
    label.save()
    LabelChange.objects.create(label=label, changed_by=reviewer, before=before, after=after)
    final_label_sync(episode=episode, user=reviewer)
    Reservation.objects.filter(episode=episode, reviewer=reviewer).delete()
    return label


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
    """Save a filter (review/episode_filters.py: runs, sites, kind, verdicts, verifier, label state, ...) as a
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
        episode__in=queues.queue_available(queue, reviewer).values("pk")).values("episode_id")
    # the caller only needs the id (to open the page): never the episode's large evidence columns
    if held_episode := Episode.objects.only("id").filter(pk__in=held).order_by("pk").first():
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
