"""The false-positive audit serves the riskiest judged successes first, each with the reason for its rank."""
from __future__ import annotations

import pytest

from review import queues
from review.models import Queue
from review.services import queues_builtin_ensure
from taskgen.models import VerifierResult
from taskgen.triage.risk import risk_reasons
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, TaskFactory

pytestmark = pytest.mark.django_db
LOG = [{"method": "GET", "path": "/sites/shop/", "status": 200}]


def _success(run, *, kind="info", changes=None, log=LOG, **judgment):
    episode = EpisodeFactory(run=run, task=TaskFactory(task_kind=kind), request_log=log,
                             data_changes=changes if changes is not None else [{"collection": "cart", "op": "create"}])
    JudgmentFactory(episode=episode, verdict="SUCCESS", **judgment)
    return episode


def test_the_audit_is_ordered_by_risk_and_scoped_to_its_run():
    run, other_run = RunFactory(name="sandbox-demo"), RunFactory(name="om2w")
    plain = _success(run)
    verifier_says_no = _success(run)
    VerifierResult.objects.create(episode=verifier_says_no, ok=False, source="sandbox")
    second_judge_says_no = _success(run)
    JudgmentFactory(episode=second_judge_says_no, config=JudgeConfigFactory(provider="gemini", model="g"),
                    verdict="NOT SUCCESS")
    no_change = _success(run, kind="action", changes=[])
    live_web_action = _success(run, kind="action", changes=[], log=[])  # no server evidence at all: not a risk
    unsupported = _success(run, unsupported_citations=2)
    inconsistent = _success(run, inconsistent=True)
    _success(other_run)  # another run's episode is not in this run's audit
    queues_builtin_ensure()
    audit = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run)
    order = queues.queue_first(audit, queues.queue_open(audit), 50)
    assert order == [inconsistent, unsupported, no_change, verifier_says_no, second_judge_says_no, plain,
                     live_web_action]
    reasons = risk_reasons([e.pk for e in order], None)
    assert reasons[inconsistent.pk] == ["the verdict contradicts its own parts"]
    assert reasons[unsupported.pk] == ["the judge cites evidence that is not there (2 citations)"]
    assert reasons[no_change.pk] == ["an action task whose session changed no data"]
    assert reasons[verifier_says_no.pk] == ["the verifier says otherwise"]
    assert reasons[second_judge_says_no.pk] == ["another judge config says otherwise"]
    assert reasons[plain.pk] == reasons[live_web_action.pk] == []
    assert Queue.objects.filter(builtin=True, run=other_run).count() == 4


def test_the_queue_page_shows_each_items_reason(reviewer_client):
    run = RunFactory()
    _success(run, inconsistent=True)
    queues_builtin_ensure()
    audit = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run)
    html = reviewer_client.get(audit.get_absolute_url()).content.decode()
    assert "the verdict contradicts its own parts" in html and "riskiest first" in html
    assert f"run {run.name}" in html and "{&#x27;runs&#x27;" not in html  # the filter in words, not a dict


def test_taking_the_next_item_follows_the_risk_order():
    from review.services import queue_take_next
    from tests.factories import UserFactory

    run = RunFactory()
    plain, inconsistent = _success(run), _success(run, inconsistent=True)
    queues_builtin_ensure()
    audit = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run)
    reviewer = UserFactory(role="reviewer")
    assert queue_take_next(queue=audit, reviewer=reviewer) == inconsistent
    assert queue_take_next(queue=audit, reviewer=reviewer, skip=inconsistent.pk) == plain


@pytest.mark.parametrize("with_config", [True, False])
def test_a_whole_runs_risk_sets_are_the_ones_each_episode_holds(with_config):
    """Read for a whole run (certify, validate's design), the disagreement risks are joins: as an OR of `id IN`
    subqueries a run of a million episodes took over fifteen minutes. The sets must be those read one episode at a
    time (correlated), for one config's verdicts and for any config's."""
    import random

    from taskgen.id_arrays import id_array
    from taskgen.models import Episode
    from taskgen.triage.risk import RISK_NAMES, risk_id_arrays, risk_sets

    rng, run = random.Random(26), RunFactory()
    configs = [JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="g"), JudgeConfigFactory(model="h")]
    for _ in range(60):
        episode = EpisodeFactory(run=run, task=TaskFactory(task_kind=rng.choice(["info", "action"])),
                                 request_log=LOG if rng.random() < 0.7 else [], data_changes=[])
        for config in configs:
            if rng.random() < 0.7:
                JudgmentFactory(episode=episode, config=config, verdict=rng.choice(["SUCCESS", "NOT SUCCESS", "NONE"]),
                                inconsistent=rng.random() < 0.2, unsupported_citations=int(rng.random() < 0.2))
        if rng.random() < 0.6:
            VerifierResult.objects.create(episode=episode, ok=rng.random() < 0.5, source="sandbox")
    config_id = configs[0].pk if with_config else None
    whole = risk_sets(Episode.objects.filter(run=run), config_id)
    one_by_one = risk_sets(Episode.objects.filter(run=run), config_id, correlated=True)
    assert whole == one_by_one and all(whole[name] for name in RISK_NAMES)
    arrays = risk_id_arrays(Episode.objects.filter(run=run), config_id)  # validate's design reads them as arrays
    assert {name: set(arrays[name].tolist()) for name in RISK_NAMES} == whole
    assert all(len(arrays[name]) == len(whole[name]) for name in RISK_NAMES)
    assert id_array(Episode.objects.filter(run=run).none()).tolist() == []


def test_a_run_judged_by_one_config_reads_no_judges_disagreeing_and_the_rest_as_before():
    """With no other config's judgments anywhere, "another judge config says otherwise" holds no episode, read for a
    whole run (no join at all) or one episode at a time; once a second config judges, it is read again."""
    from taskgen.models import Episode
    from taskgen.triage.risk import risk_id_arrays, risk_sets

    run, config = RunFactory(), JudgeConfigFactory()
    episodes = [EpisodeFactory(run=run, request_log=LOG, data_changes=[]) for _ in range(6)]
    for index, episode in enumerate(episodes):
        JudgmentFactory(episode=episode, config=config, verdict="SUCCESS" if index % 2 else "NOT SUCCESS")
    VerifierResult.objects.create(episode=episodes[1], ok=False, source="sandbox")
    whole = risk_sets(Episode.objects.filter(run=run), config.pk)
    assert whole == risk_sets(Episode.objects.filter(run=run), config.pk, correlated=True)
    assert whole["judges_disagree"] == set() and whole["verifier_disagrees"] == {episodes[1].pk}
    assert risk_id_arrays(Episode.objects.filter(run=run), config.pk)["judges_disagree"].tolist() == []
    JudgmentFactory(episode=episodes[3], config=JudgeConfigFactory(model="second"), verdict="NOT SUCCESS")
    assert risk_sets(Episode.objects.filter(run=run), config.pk)["judges_disagree"] == {episodes[3].pk}
