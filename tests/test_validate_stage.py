"""Validate's stage function: the reference's figures on hand-made sets, breakdowns, lists, comparisons, agreement."""
from __future__ import annotations

import pytest

from taskgen.stages.validate.humans import human_agreement, judge_reviewer_agreement, reviewer_agreement
from taskgen.stages.validate.service import (
    ValidateError,
    default_config,
    validate_compare,
    validate_compute,
    validate_false_positive_task_ids,
    validate_sample_estimate,
)
from taskgen.stats import REFERENCE_KEYS
from tests.factories import JudgeConfigFactory, JudgmentFactory, RunFactory, SiteFactory, UserFactory
from tests.validate_data import CELL_PAIRS, label, make_cells, make_episode, reference_validate

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    return RunFactory(name="human-train")


@pytest.fixture
def config():
    return JudgeConfigFactory(provider="gemini", model="gemini-3.5-flash", prompt_version="v1")


@pytest.mark.parametrize("cells", [
    {"tp": 5, "fp": 3, "fn": 2, "tn": 7},   # every cell non-zero
    {"tp": 1, "fp": 15, "fn": 3, "tn": 1},  # precision 1/16 = 0.0625: a rounding tie (round() gives 0.062)
    {"tp": 3, "fp": 13, "fn": 3, "tn": 13},  # 3/16 = 0.1875 and agreement 16/32 = 0.5: ties again
    {"tp": 0, "fp": 0, "fn": 4, "tn": 2},   # nobody judged a success: precision's denominator would be 0
    {"tp": 0, "fp": 3, "fn": 0, "tn": 2},   # no true success: recall's denominator would be 0
])
def test_figures_match_the_reference_formula(run, config, cells):
    site = SiteFactory(slug="shop")
    make_cells(run=run, config=config, site=site, **cells)
    pairs = [(CELL_PAIRS[cell][0], CELL_PAIRS[cell][1] == "SUCCESS") for cell, n in cells.items() for _ in range(n)]
    report = validate_compute(runs=[run], config=config, against="verifier")
    assert report.reference_line == reference_validate(pairs)
    assert list(report.reference_line) == list(REFERENCE_KEYS)


def test_no_episodes_gives_zeros_not_an_error(run, config):
    report = validate_compute(runs=[run], config=config)
    assert report.reference_line == reference_validate([])
    assert report.figures["kappa"] is None and report.figures["precision_ci"] is None


def test_unjudged_episodes_are_counted_and_left_out(run, config):
    site = SiteFactory(slug="shop")
    make_cells(run=run, config=config, site=site, tp=2, tn=1)
    make_episode(run=run, site=site, truth=True, verdict="NONE", config=config)  # the answer had no verdict
    make_episode(run=run, site=site, truth=False)  # never judged
    make_episode(run=run, site=site, truth=True, verdict="SUCCESS", config=JudgeConfigFactory(model="other"))
    make_episode(run=run, site=site, verdict="SUCCESS", config=config)  # judged, but no verifier result
    report = validate_compute(runs=[run], config=config)
    assert report.figures["episodes"] == 3
    assert (report.unjudged, report.unjudged_no_verdict, report.judged_without_truth) == (3, 1, 1)
    assert report.episodes_in_runs == 7 and report.with_truth == 6


def test_breakdown_per_site_and_kind_adds_up(run, config):
    shop, mail = SiteFactory(slug="shop"), SiteFactory(slug="mail")
    make_cells(run=run, config=config, site=shop, kind="action", tp=2, fp=1)
    make_cells(run=run, config=config, site=mail, kind="info", fn=1, tn=3, tp=1)
    report = validate_compute(runs=[run], config=config)
    by_site = {row["name"]: row for row in report.per_site}
    assert by_site["shop"]["precision"] == round(2 / 3, 3) and by_site["mail"]["recall"] == 0.5
    assert {row["name"]: row["episodes"] for row in report.per_kind} == {"action": 3, "info": 5}
    assert report.figures["tp"] == 3 and report.figures["f1"] == round(6 / (6 + 1 + 1), 3)


def test_false_positive_and_negative_lists_link_to_episodes(run, config):
    site = SiteFactory(slug="shop")
    fp = make_episode(run=run, site=site, truth=False, verdict="SUCCESS", config=config)
    fn = make_episode(run=run, site=site, truth=True, verdict="NOT SUCCESS", config=config)
    make_cells(run=run, config=config, site=site, tp=1, tn=1)
    report = validate_compute(runs=[run], config=config)
    assert [row["url"] for row in report.false_positives] == [fp.get_absolute_url()]
    assert [row["task_id"] for row in report.false_negatives] == [fn.task.task_id]
    assert validate_false_positive_task_ids(runs=[run], config=config) == [fp.task.task_id]


def test_human_truth_uses_final_labels_and_leaves_unsure_out(run, config):
    site = SiteFactory(slug="shop")
    make_episode(run=run, site=site, verdict="SUCCESS", config=config, final="SUCCESS", truth=False)
    make_episode(run=run, site=site, verdict="SUCCESS", config=config, final="NOT SUCCESS")
    make_episode(run=run, site=site, verdict="NOT SUCCESS", config=config, final="UNSURE")
    report = validate_compute(runs=[run], config=config, against="human")
    assert (report.figures["tp"], report.figures["fp"], report.figures["episodes"]) == (1, 1, 2)


def test_one_reviewers_labels_as_truth(run, config):
    site = SiteFactory(slug="shop")
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    first = make_episode(run=run, site=site, verdict="SUCCESS", config=config)
    second = make_episode(run=run, site=site, verdict="NOT SUCCESS", config=config)
    label(first, ann, "NOT SUCCESS")
    label(first, bob, "SUCCESS")
    label(second, bob, "NOT SUCCESS")
    report = validate_compute(runs=[run], config=config, against="reviewer", reviewer=ann)
    assert (report.figures["fp"], report.figures["episodes"], report.reviewer) == (1, 1, "ann")
    assert validate_compute(runs=[run], config=config, against="reviewer", reviewer=bob).figures["agreement"] == 1.0
    with pytest.raises(ValidateError, match="reviewer"):
        validate_compute(runs=[run], config=config, against="reviewer")
    with pytest.raises(ValidateError, match="unknown ground truth"):
        validate_compute(runs=[run], config=config, against="oracle")


def test_two_configs_side_by_side_on_the_same_episodes(run, config):
    site = SiteFactory(slug="shop")
    rules = JudgeConfigFactory(provider="rules", model="rules-v1")
    pairs = [(True, "SUCCESS", "SUCCESS"), (True, "SUCCESS", "NOT SUCCESS"), (False, "SUCCESS", "SUCCESS"),
             (False, "NOT SUCCESS", "NOT SUCCESS"), (False, "NOT SUCCESS", None)]
    for truth, verdict_a, verdict_b in pairs:
        episode = make_episode(run=run, site=site, truth=truth, verdict=verdict_a, config=config, cost="0.002")
        if verdict_b:  # the second config's judgment of the same episode
            JudgmentFactory(episode=episode, config=rules, verdict=verdict_b, cost_usd="0")
    result = validate_compare(runs=[run], config_a=config, config_b=rules)
    assert result["a"].figures["episodes"] == result["b"].figures["episodes"] == 4
    assert (result["a"].figures["fp"], result["b"].figures["tp"]) == (1, 1)
    assert result["agreement"]["episodes"] == 4 and result["agreement"]["agreement"] == 0.75
    assert result["a"].cost_per_1000 == 2.0 and result["b"].cost_per_1000 == 0.0


def test_sample_estimate_counts_strata_by_judge_verdict(run, config):
    site = SiteFactory(slug="shop")
    labelled = [make_episode(run=run, site=site, verdict="SUCCESS", config=config, final=f)
                for f in ["SUCCESS"] * 3 + ["NOT SUCCESS", "UNSURE"]]
    make_episode(run=run, site=site, verdict="NOT SUCCESS", config=config, final="SUCCESS")
    for _ in range(4):
        make_episode(run=run, site=site, verdict="SUCCESS", config=config)
    estimate = validate_sample_estimate(runs=[run], config=config)
    # issue 22: no design drew these labels (nobody opened the run's Certify queue), so none is a sample
    assert estimate["judged_success"] == {"population": 9, "labelled": 0, "true_successes": 0}
    assert estimate["precision"] is None and estimate["judged_failures"] is None
    only_two = validate_sample_estimate(runs=[run], config=config, sample=[e.pk for e in labelled[:2]])
    assert only_two["judged_success"]["labelled"] == 2 and only_two["judged_failure"]["labelled"] == 0


def test_reviewer_pairs_and_judge_against_each_reviewer(run, config):
    site = SiteFactory(slug="shop")
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    verdicts = [("SUCCESS", "SUCCESS", "SUCCESS"), ("SUCCESS", "NOT SUCCESS", "SUCCESS"),
                ("NOT SUCCESS", "NOT SUCCESS", "NOT SUCCESS"), ("NOT SUCCESS", "UNSURE", "SUCCESS")]
    for a, b, judge in verdicts:
        episode = make_episode(run=run, site=site, verdict=judge, config=config)
        label(episode, ann, a)
        label(episode, bob, b)
    [pair] = reviewer_agreement(runs=[run])
    assert (pair["a"], pair["b"], pair["episodes"], pair["agree"]) == ("ann", "bob", 3, 2)
    assert pair["kappa"] == 0.4  # po 2/3, pe 4/9: (2/3 - 4/9) / (5/9)
    by_reviewer = {row["reviewer"]: row for row in judge_reviewer_agreement(runs=[run], config=config)}
    assert by_reviewer["ann"]["episodes"] == 4 and by_reviewer["ann"]["agree"] == 3
    assert by_reviewer["bob"]["episodes"] == 3 and by_reviewer["bob"]["agree"] == 2


def test_default_config_is_the_most_used_on_the_run(run, config):
    site = SiteFactory(slug="shop")
    make_cells(run=run, config=config, site=site, tp=2)
    make_cells(run=run, config=JudgeConfigFactory(model="rare"), site=site, tp=1)
    assert default_config(runs=[run]) == config
    assert default_config(runs=[RunFactory()]) is None


def test_several_runs_are_measured_together(config):
    site = SiteFactory(slug="shop")
    first, second = RunFactory(name="arm-a"), RunFactory(name="arm-b")
    make_cells(run=first, config=config, site=site, tp=2, fp=1)
    make_cells(run=second, config=config, site=site, tn=3, fp=1)
    both = validate_compute(runs=[first, second], config=config)
    assert (both.figures["episodes"], both.figures["fp"], both.runs) == (7, 2, ["arm-a", "arm-b"])
    assert [row["run"] for row in both.false_positives] == sorted(row["run"] for row in both.false_positives)
    assert validate_compute(runs=[second], config=config).figures["episodes"] == 4


def test_human_agreement_is_pooled_over_every_episode_labelled_twice_with_and_without_unsure(run):
    site = SiteFactory(slug="shop")
    ann, bob, cy = UserFactory(username="ann"), UserFactory(username="bob"), UserFactory(username="cy")
    for first, second in [("SUCCESS", "SUCCESS"), ("NOT SUCCESS", "NOT SUCCESS"), ("SUCCESS", "UNSURE"),
                          ("UNSURE", "UNSURE")]:
        episode = make_episode(run=run, site=site)  # no judgment at all: humans' agreement needs no judge
        label(episode, ann, first)
        label(episode, bob, second)
    three = make_episode(run=run, site=site)
    for reviewer, verdict in ((ann, "SUCCESS"), (bob, "SUCCESS"), (cy, "NOT SUCCESS")):
        label(three, reviewer, verdict)
    human = human_agreement(runs=[run])
    assert (human["with_unsure"]["pairs"], human["with_unsure"]["agree"]) == (7, 4)  # 4 episodes + 3 pairs of one
    assert (human["without_unsure"]["pairs"], human["without_unsure"]["agree"]) == (5, 3)
    assert human["with_unsure"]["categories"] == ["NOT SUCCESS", "SUCCESS", "UNSURE"]


def test_the_pooled_human_kappa_is_the_same_whoever_labelled_first():
    """Issue 22, seen 4: the same labels given in another order (who labelled each episode first) give the same
    pooled figure; with Cohen's kappa, whose rater A was the earlier label, they did not."""
    site = SiteFactory(slug="shop")
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    verdicts = [("SUCCESS", "SUCCESS")] * 5 + [("NOT SUCCESS", "NOT SUCCESS")] * 2 + [("SUCCESS", "NOT SUCCESS")] * 3
    figures = []
    for name, ann_first in (("ann-first", [True] * 10), ("mixed", [True] * 8 + [False] * 2)):
        run = RunFactory(name=name)
        for (a, b), ann_goes_first in zip(verdicts, ann_first, strict=True):
            episode = make_episode(run=run, site=site)
            for reviewer, verdict in ((ann, a), (bob, b)) if ann_goes_first else ((bob, b), (ann, a)):
                label(episode, reviewer, verdict)
        figures.append(human_agreement(runs=[run]))
    assert figures[0] == figures[1]
    assert figures[0]["without_unsure"]["kappa"] == 0.341  # Scott's pi: shares S 13/20, N 7/20; (0.7-0.545)/0.455
