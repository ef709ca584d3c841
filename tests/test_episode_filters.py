"""One filter vocabulary: unknown values refused, every part shown in words, the same episodes everywhere."""
from __future__ import annotations

import pytest
from django.http import QueryDict
from django.urls import reverse

from review.models import Queue
from review.services import label_set, queue_create_from_filters
from taskgen.labels.fields import ReviewError
from taskgen.models import Episode, VerifierResult
from taskgen.triage.filters import FilterError, condition, describe, episode_filter_parse
from tests.factories import (
    EpisodeFactory,
    JudgeConfigFactory,
    JudgmentFactory,
    RunFactory,
    SiteFactory,
    TaskFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _parse(query: str, **kwargs):
    return episode_filter_parse(QueryDict(query), **kwargs)


def test_unknown_sites_runs_and_values_are_refused_with_their_names():
    SiteFactory(slug="shop")
    with pytest.raises(FilterError) as refused:
        _parse("sites=shop,nowhere&runs=987654&verdicts=MAYBE&verifier=perhaps&label_state=odd&task_kind=x")
    message = str(refused.value)
    for fragment in ("no site nowhere", "no run 987654", "unknown judge verdict 'MAYBE'",
                     "unknown verifier state 'perhaps'", "unknown label state 'odd'", "unknown task kind 'x'"):
        assert fragment in message


def test_a_queue_for_a_site_that_does_not_exist_is_not_created(reviewer_client):
    with pytest.raises(ReviewError, match="no site atlantis"):
        queue_create_from_filters(name="ghost", filters={"sites": ["atlantis"]}, user=None)
    response = reviewer_client.post(reverse("review:queue_create"), {"name": "ghost", "sites": "atlantis"},
                                    follow=True)
    assert "no site atlantis" in response.content.decode() and not Queue.objects.filter(name="ghost").exists()


def test_a_filter_in_words():
    run, config = RunFactory(name="sandbox-demo"), JudgeConfigFactory()
    SiteFactory(slug="shop")
    f = _parse(f"runs={run.pk}&sites=shop&task_kind=action&verdicts=SUCCESS&verifier=fail&label_state=unlabelled"
               "&disagree=1&unsupported=on&search=bourbon", config_id=config.pk)
    assert describe(f) == ["run sandbox-demo", "site shop", "action tasks", "judge said SUCCESS", "verifier failed",
                           "no label yet", "judge and verifier disagree", "the judge cites evidence that is not there",
                           "task id or instruction contains “bourbon”"]
    assert describe(_parse("")) == []


def test_each_part_selects_what_it_says():
    run, config = RunFactory(), JudgeConfigFactory()
    fp = EpisodeFactory(run=run, task=TaskFactory(task_id="sb-shop-017", instruction="Buy Brazil Santos Bourbon"))
    JudgmentFactory(episode=fp, config=config, verdict="SUCCESS", unsupported_citations=1)
    VerifierResult.objects.create(episode=fp, ok=False, source="sandbox")
    tp = EpisodeFactory(run=run)
    JudgmentFactory(episode=tp, config=config, verdict="SUCCESS")
    VerifierResult.objects.create(episode=tp, ok=True, source="sandbox")
    unjudged = EpisodeFactory(run=run)
    label_set(episode=tp, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")

    def picked(query: str) -> set:
        return set(Episode.objects.filter(condition(_parse(f"runs={run.pk}&{query}", config_id=config.pk))))

    assert picked("verdicts=SUCCESS&verifier=fail") == {fp}
    assert picked("disagree=1") == {fp} and picked("unsupported=1") == {fp}
    assert picked("verdicts=UNJUDGED") == {unjudged} and picked("verifier=none") == {unjudged}
    assert picked("label_state=unlabelled") == {fp, unjudged} and picked("label_state=final-success") == {tp}
    assert picked("search=bourbon") == {fp} and picked("search=SB-SHOP-017") == {fp}
