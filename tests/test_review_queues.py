"""Queues: built-in membership, saved filters, explicit lists, the stratified sample, reservations, K labels."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from review import queues
from review.models import Queue, Reservation
from review.services import (
    _reserve,
    label_set,
    queue_create_from_episodes,
    queue_create_from_filters,
    queue_create_sample,
    queue_take_next,
    queues_builtin_ensure,
)
from taskgen.labels.fields import ReviewError
from taskgen.models import Run, VerifierResult
from tests.concurrency import together
from tests.factories import EpisodeFactory, JudgmentFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Many users per test: hashing each password properly would take most of the test's time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _run() -> Run:
    return Run.objects.get_or_create(name="audited")[0]


def _builtin(kind: str) -> Queue:
    """The built-in queue of this kind for the run the test's episodes are in (each run has its own)."""
    queues_builtin_ensure()
    return Queue.objects.get(builtin=True, kind=kind, run=_run())


def _judged(verdict: str, **kwargs):
    if "episode" not in kwargs:
        kwargs["episode"] = EpisodeFactory(run=_run())
    return JudgmentFactory(verdict=verdict, **kwargs).episode


def test_false_positive_queue_holds_judge_successes_until_reviewed():
    yes, no = _judged("SUCCESS"), _judged("NOT SUCCESS")
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    assert list(queues.queue_open(queue)) == [yes]
    label_set(episode=yes, reviewer=UserFactory(role="reviewer"), verdict="NOT SUCCESS")
    assert list(queues.queue_open(queue)) == []
    assert queues.queue_progress(queue)["done"] == 1 and no not in queues.queue_scope(queue)


def test_builtin_queues_for_disagreement_inconsistency_and_no_verdict():
    fp = _judged("SUCCESS")
    VerifierResult.objects.create(episode=fp, ok=False, source="results.jsonl")
    agree = _judged("SUCCESS")
    VerifierResult.objects.create(episode=agree, ok=True, source="results.jsonl")
    odd = _judged("SUCCESS", inconsistent=True)
    silent = _judged("NONE")
    assert list(queues.queue_scope(_builtin(Queue.Kind.DISAGREE))) == [fp]
    assert list(queues.queue_scope(_builtin(Queue.Kind.INCONSISTENT))) == [odd]
    assert list(queues.queue_scope(_builtin(Queue.Kind.NO_VERDICT))) == [silent]


def test_saved_filter_selects_by_run_site_kind_verdict_and_tag():
    target = _judged("SUCCESS")
    _judged("SUCCESS", episode=EpisodeFactory())  # another run
    other_run = _judged("NOT SUCCESS", episode=EpisodeFactory(run=target.run))
    label_set(episode=target, reviewer=UserFactory(role="reviewer"), verdict="UNSURE", tags=["evidence misread"])
    user = UserFactory(role="reviewer")
    by_run = queue_create_from_filters(name="run", filters={"runs": [target.run_id]}, user=user)
    assert set(queues.queue_scope(by_run)) == {target, other_run}
    narrow = queue_create_from_filters(name="narrow", user=user, filters={
        "runs": [target.run_id], "sites": [target.site.slug], "task_kind": "info", "verdicts": ["SUCCESS"],
        "tags": ["evidence misread"]})
    assert list(queues.queue_scope(narrow)) == [target]


def test_a_queue_from_an_explicit_episode_list_keeps_its_order_and_rejects_unknown_ids():
    a, b, c = EpisodeFactory(), EpisodeFactory(), EpisodeFactory()
    queue = queue_create_from_episodes(name="false positives", episode_ids=[c.pk, a.pk], user=None)
    assert list(queues.queue_scope(queue)) == [c, a] and b not in queues.queue_scope(queue)
    with pytest.raises(ReviewError, match="no such episodes: 999999"):
        queue_create_from_episodes(name="bad", episode_ids=[a.pk, 999999], user=None)


def test_random_sample_is_stratified_by_verdict_and_fixed_by_the_seed(settings):
    for n in range(12):
        _judged(["SUCCESS", "NOT SUCCESS", "NONE"][n % 3])
    first = queue_create_sample(name="s1", per_verdict=2, user=None)
    again = queue_create_sample(name="s2", per_verdict=2, user=None)
    assert queues.sample_episode_ids(first) == queues.sample_episode_ids(again)
    strata = queues.sample_strata(first)
    assert {k: len(v) for k, v in strata.items()} == {"SUCCESS": 2, "NOT SUCCESS": 2, "NONE": 2}
    assert first.sample_population == {"SUCCESS": 4, "NOT SUCCESS": 4, "NONE": 4}
    settings.SAMPLE_SEED = 7
    drawn = [queues.sample_draw(population={"SUCCESS": list(range(100))}, per_stratum=5) for _ in range(2)]
    assert drawn[0] == drawn[1]
    assert drawn[0] != queues.sample_draw(population={"SUCCESS": list(range(100))}, per_stratum=5, seed=8)


def test_two_reviewers_taking_next_get_different_items():
    first, second = _judged("SUCCESS"), _judged("SUCCESS")
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    alice, bob = UserFactory(role="reviewer"), UserFactory(role="reviewer")
    got_a = queue_take_next(queue=queue, reviewer=alice)
    got_b = queue_take_next(queue=queue, reviewer=bob)
    assert {got_a, got_b} == {first, second}
    assert queue_take_next(queue=queue, reviewer=alice) == got_a  # a reload keeps your item
    assert queue_take_next(queue=queue, reviewer=UserFactory(role="reviewer")) is None


def test_the_item_a_reviewer_holds_is_looked_up_in_their_reservations_not_among_the_episodes():
    """Take next first serves the item the reviewer already holds. Asked as "the episodes whose id is among my
    reservations", PostgreSQL walked the run's episodes in id order to find one, all million of them when the reviewer
    held none (60 of the 90 ms of a take at the bench's scale): the lookup reads the reservations."""
    _judged("SUCCESS")
    queue, alice = _builtin(Queue.Kind.FALSE_POSITIVE), UserFactory(role="reviewer")
    for held in (False, True):  # nothing held yet, then the item the first take reserved
        with CaptureQueriesContext(connection) as seen:
            got = queue_take_next(queue=queue, reviewer=alice)
        assert got is not None
        assert seen.captured_queries[0]["sql"].startswith('SELECT "review_reservation"."episode_id"'), held


def test_an_expired_reservation_can_be_taken_over_but_a_live_one_cannot():
    episode = _judged("SUCCESS")
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    alice, bob = UserFactory(role="reviewer"), UserFactory(role="reviewer")
    Reservation.objects.create(queue=queue, episode=episode, reviewer=alice,
                               expires_at=timezone.now() + timedelta(minutes=5))
    assert _reserve(queue=queue, episode=episode, reviewer=bob) is False  # lost the race: the row is alice's
    assert queue_take_next(queue=queue, reviewer=bob) is None
    Reservation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert queue_take_next(queue=queue, reviewer=bob) == episode
    assert Reservation.objects.get().reviewer == bob


def test_labelling_releases_the_reservation_and_k_labels_keep_the_item_open():
    episode = _judged("SUCCESS")
    queue = queue_create_from_filters(name="agreement", filters={"verdicts": ["SUCCESS"]}, user=None,
                                      labels_needed=2)
    alice, bob, carol = (UserFactory(role="reviewer") for _ in range(3))
    assert queue_take_next(queue=queue, reviewer=alice) == episode
    assert queue_take_next(queue=queue, reviewer=bob) is None  # held by alice
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    assert not Reservation.objects.exists()
    assert queue_take_next(queue=queue, reviewer=alice) is None  # alice labelled it already
    assert queue_take_next(queue=queue, reviewer=bob) == episode  # one more label needed
    label_set(episode=episode, reviewer=bob, verdict="NOT SUCCESS")
    assert queue_take_next(queue=queue, reviewer=carol) is None  # K=2 reached
    progress = queues.queue_progress(queue)
    assert (progress["done"], progress["remaining"]) == (1, 0)
    assert sorted(r["labels"] for r in progress["reviewers"]) == [1, 1]


@pytest.mark.django_db(transaction=True)
def test_reviewers_asking_at_the_same_moment_get_different_items():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions need PostgreSQL (SQLite serialises writers)")
    episodes = [_judged("SUCCESS") for _ in range(6)]
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    reviewers = [UserFactory(role="reviewer") for _ in range(6)]
    got, errors = together([lambda user=user: queue_take_next(queue=queue, reviewer=user) for user in reviewers])
    assert errors == []
    assert sorted(e.pk for e in got) == sorted(e.pk for e in episodes)


def test_next_without_labelling_skips_the_current_item_and_gives_it_back():
    first, second = _judged("SUCCESS"), _judged("SUCCESS")
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    alice, bob = UserFactory(role="reviewer"), UserFactory(role="reviewer")
    assert queue_take_next(queue=queue, reviewer=alice) == first
    assert queue_take_next(queue=queue, reviewer=alice, skip=first.pk) == second
    assert queue_take_next(queue=queue, reviewer=bob) == first  # alice gave it back


def test_previous_goes_back_to_the_episode_labelled_before(reviewer_client):
    from django.urls import reverse

    first, second = _judged("SUCCESS"), _judged("SUCCESS")
    queue = _builtin(Queue.Kind.FALSE_POSITIVE)
    label_set(episode=first, reviewer=reviewer_client.user, verdict="SUCCESS")
    label_set(episode=second, reviewer=reviewer_client.user, verdict="UNSURE")
    response = reviewer_client.get(reverse("review:queue_previous", args=[queue.pk, second.pk]))
    assert response["Location"] == f"{first.get_absolute_url()}?queue={queue.pk}"
    response = reviewer_client.get(reverse("review:queue_previous", args=[queue.pk, first.pk]))
    assert response["Location"] == queue.get_absolute_url()
