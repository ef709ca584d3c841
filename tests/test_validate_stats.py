"""Validate's arithmetic against published values and against simulations with known truth."""
from __future__ import annotations

import random

import pytest

from taskgen.stats import (
    Confusion,
    Stratum,
    cohen_kappa,
    f1_score,
    half_width,
    labels_needed,
    pooled_agreement,
    sample_estimate,
    wilson_interval,
)


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3 (Wilson score).
@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
    (29, 29, 0.8830, 1.0),
])
def test_wilson_interval_matches_newcombes_table(successes, n, low, high):
    assert wilson_interval(successes, n) == (pytest.approx(low, abs=1e-4), pytest.approx(high, abs=1e-4))


def test_wilson_interval_is_undefined_without_a_sample_and_closed_with_the_whole_population():
    assert wilson_interval(0, 0) is None
    assert wilson_interval(30, 40, population=40) == (0.75, 0.75)
    assert half_width(wilson_interval(30, 40, population=80)) < half_width(wilson_interval(30, 40))


# Confusion(tp, fp, fn, tn) with the judge as rater B: the two worked examples of Cohen's kappa on Wikipedia.
@pytest.mark.parametrize(("cells", "kappa"), [((20, 10, 5, 15), 0.4), ((45, 25, 15, 15), 0.13)])
def test_cohen_kappa_matches_worked_examples(cells, kappa):
    assert cohen_kappa(Confusion(*cells)) == kappa


def test_kappa_and_f1_are_none_when_undefined():
    assert cohen_kappa(Confusion()) is None
    assert cohen_kappa(Confusion(tn=9)) is None  # both raters always say no: chance agreement is total
    assert f1_score(Confusion(tn=9)) is None
    assert cohen_kappa(Confusion(tp=3, tn=4)) == 1.0 and cohen_kappa(Confusion(fp=3, fn=4)) < 0


def test_labels_needed_reaches_the_target_and_not_one_label_earlier():
    stratum = Stratum(population=5000, labelled=100, true_successes=80)
    more = labels_needed(stratum=stratum)
    n = stratum.labelled + more
    assert half_width(wilson_interval(round(0.8 * n), n, population=5000)) <= 0.03
    assert half_width(wilson_interval(round(0.8 * (n - 1)), n - 1, population=5000)) > 0.03
    # the textbook size z^2 p (1 - p) / e^2 = 683 with the finite-population correction for N = 5000 is about 601
    assert abs(n - 601) <= 5
    assert labels_needed(stratum=Stratum(population=100, labelled=100, true_successes=50)) == 0
    assert labels_needed(stratum=Stratum(population=0, labelled=0, true_successes=0)) == 0


def _draw(population: list[tuple[bool, bool]], size: int, rng: random.Random) -> tuple[Stratum, Stratum]:
    """A uniform random sample of (judge says success, truly successful) episodes, as the two strata's counts."""
    sample = rng.sample(population, size)
    n_s = sum(judge for judge, _ in population)
    strata = []
    for judged, count in ((True, n_s), (False, len(population) - n_s)):
        picked = [truth for judge, truth in sample if judge == judged]
        strata.append(Stratum(population=count, labelled=len(picked), true_successes=sum(picked)))
    return strata[0], strata[1]


def test_sample_estimate_covers_the_known_truth_in_a_simulation():
    """A run of 10,000 episodes: 4,000 judged successes of which 2,800 are real (precision 0.7), 600 real successes
    among 6,000 judged failures (recall 2800/3400); 400 random episodes labelled, 300 times over."""
    rng = random.Random(20261202)
    population = [(True, i < 2800) for i in range(4000)] + [(False, i < 600) for i in range(6000)]
    truth = {"precision": 0.7, "success_rate": 0.34, "recall": 2800 / 3400}
    covered = dict.fromkeys(truth, 0)
    estimates = []
    rounds = 300
    for _ in range(rounds):
        estimate = sample_estimate(*_draw(population, 400, rng))
        estimates.append(estimate["precision"])
        low, high = estimate["precision_ci"]
        covered["precision"] += low <= truth["precision"] <= high
        for key in ("success_rate", "recall"):
            low, high = estimate[key]["ci"]
            covered[key] += low <= truth[key] <= high
    assert abs(sum(estimates) / rounds - 0.7) < 0.01  # unbiased
    assert 0.92 <= covered["precision"] / rounds <= 0.985  # a 95% interval covers about 95% of the time
    assert 0.92 <= covered["success_rate"] / rounds <= 0.985
    assert covered["recall"] / rounds >= 0.95  # the recall interval is conservative by construction


def test_labels_needed_is_enough_in_a_simulation():
    """Label as many more as advised, and the precision interval is within ±3 points (give or take the noise)."""
    rng = random.Random(7)
    population = [(True, i < 2800) for i in range(4000)] + [(False, i < 600) for i in range(6000)]
    first = sample_estimate(*_draw(population, 400, rng))
    judged_share = 0.4  # the sample is over all episodes: 40% of the extra labels land on judged successes
    total = round((first["judged_success"]["labelled"] + first["more_labels_needed"]) / judged_share)
    widths = [sample_estimate(*_draw(population, total, rng))["precision_half_width"] for _ in range(50)]
    assert sum(widths) / len(widths) <= 0.031


def test_a_kappa_of_zero_is_never_printed_as_minus_zero():
    assert str(cohen_kappa(Confusion(2, 1, 4, 2))) == "0.0"


def _pairs(counts: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    return [pair for pair, n in counts.items() for _ in range(n)]


def test_pooled_agreement_of_two_categories_is_cohens_kappa():
    # Wikipedia's worked example (20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no): agreement 0.7, kappa 0.4
    pairs = _pairs({("Y", "Y"): 20, ("Y", "N"): 5, ("N", "Y"): 10, ("N", "N"): 15})
    pooled = pooled_agreement(pairs)
    assert (pooled["pairs"], pooled["agree"], pooled["agreement"], pooled["kappa"]) == (50, 35, 0.7, 0.4)
    low, high = pooled["agreement_ci"]
    assert low < 0.7 < high
    k_low, k_high = pooled["kappa_ci"]
    # Cohen's standard error: sqrt(0.7 * 0.3 / 50) / (1 - 0.5) = 0.1296; 95%: 0.4 -/+ 0.254
    assert (k_low, k_high) == (0.146, 0.654)


def test_pooled_agreement_counts_a_third_category():
    counts = {("S", "S"): 40, ("N", "N"): 45, ("U", "U"): 5, ("S", "N"): 4, ("N", "S"): 3, ("S", "U"): 2,
              ("U", "N"): 1}
    pooled = pooled_agreement(_pairs(counts))
    n = 100
    first = {c: sum(v for (a, _), v in counts.items() if a == c) / n for c in "SNU"}
    second = {c: sum(v for (_, b), v in counts.items() if b == c) / n for c in "SNU"}
    expected = sum(first[c] * second[c] for c in "SNU")
    assert pooled["categories"] == ["N", "S", "U"] and pooled["agreement"] == 0.9
    assert pooled["kappa"] == round((0.9 - expected) / (1 - expected), 3)


def test_pooled_agreement_without_pairs_or_with_one_category_has_no_kappa():
    assert pooled_agreement([])["kappa"] is None and pooled_agreement([])["pairs"] == 0
    same = pooled_agreement([("S", "S")] * 4)
    assert same["agreement"] == 1.0 and same["kappa"] is None
