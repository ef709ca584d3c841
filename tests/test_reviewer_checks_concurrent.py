"""Known-truth checks under reviewers taking items at the same moment (released by a barrier): every reviewer gets
an item or a clear None, no two hold the same episode of the queue, and a check is recorded exactly for the reviewer
who holds it. Meant for PostgreSQL (SKIP LOCKED, the conditional upsert); it runs on SQLite too."""
from __future__ import annotations

import pytest
from django.db import connection

from review.models import Queue, Reservation
from review.services import queue_take_next
from taskgen.models import ReviewerCheck, VerifierResult
from tests.concurrency import together
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_reviewers_taking_checks_at_once_never_share_an_episode():
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers: the race is PostgreSQL's")
    run, config = RunFactory(name="race"), JudgeConfigFactory()
    for n in range(8):
        episode = EpisodeFactory(run=run)
        JudgmentFactory(episode=episode, config=config, verdict="SUCCESS")
        if n < 3:
            VerifierResult.objects.create(episode=episode, ok=True, source="sandbox")
    queue = Queue.objects.create(name="race", kind=Queue.Kind.FILTER, filters={"runs": [run.pk]}, check_rate=1.0)
    reviewers = [UserFactory(username=f"r{n}", role="reviewer") for n in range(6)]

    def take(reviewer) -> tuple[int, int | None]:
        episode = queue_take_next(queue=queue, reviewer=reviewer)
        return reviewer.pk, episode.pk if episode else None

    results, errors = together([lambda reviewer=reviewer: take(reviewer) for reviewer in reviewers])
    taken = dict(results)
    assert errors == [] and len(taken) == 6 and None not in taken.values()
    assert len(set(taken.values())) == 6  # eight episodes, six reviewers: each holds a different one
    held = dict(Reservation.objects.filter(queue=queue).values_list("reviewer_id", "episode_id"))
    assert held == taken
    for check in ReviewerCheck.objects.all():
        assert taken[check.reviewer_id] == check.episode_id  # a check is recorded only for the one who holds it
    assert ReviewerCheck.objects.count() >= 1
