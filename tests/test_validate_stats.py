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


def _scotts_pi(counts: dict[tuple[str, str], int]) -> float:
    """Scott's pi by its definition, written out here apart from the app: observed agreement, and chance agreement
    from each category's share of all the labels (both labels of every pair pooled)."""
    n = sum(counts.values())
    observed = sum(v for (a, b), v in counts.items() if a == b) / n
    shares: dict[str, float] = {}
    for (a, b), v in counts.items():
        shares[a] = shares.get(a, 0) + v / (2 * n)
        shares[b] = shares.get(b, 0) + v / (2 * n)
    expected = sum(share * share for share in shares.values())
    return (observed - expected) / (1 - expected)


def test_pooled_kappa_of_two_categories_is_scotts_pi_checked_by_hand():
    # Wikipedia's Cohen example (20 yes-yes, 5 yes-no, 10 no-yes, 15 no-no): agreement 0.7; the pooled share of yes
    # is (2*20 + 5 + 10) / 100 = 0.55, chance agreement 0.55^2 + 0.45^2 = 0.505, pi = 0.195 / 0.495 = 0.3939...
    counts = {("Y", "Y"): 20, ("Y", "N"): 5, ("N", "Y"): 10, ("N", "N"): 15}
    pooled = pooled_agreement(_pairs(counts))
    assert (pooled["pairs"], pooled["agree"], pooled["agreement"], pooled["kappa"]) == (50, 35, 0.7, 0.394)
    assert pooled["kappa"] == round(_scotts_pi(counts), 3) and pooled["statistic"].startswith("Fleiss' kappa")
    low, high = pooled["agreement_ci"]
    assert low < 0.7 < high
    k_low, k_high = pooled["kappa_ci"]
    assert k_low < 0.394 < k_high


def test_pooled_kappa_does_not_depend_on_which_label_counts_first():
    """Issue 22: on AgentRewardBench the pooled Cohen's kappa moved 0.741 -> 0.745 with labelling order."""
    counts = {("S", "S"): 40, ("N", "N"): 30, ("U", "U"): 4, ("S", "N"): 9, ("N", "S"): 2, ("S", "U"): 3,
              ("U", "N"): 2}
    pairs = _pairs(counts)
    first = pooled_agreement(pairs, units=list(range(len(pairs))))
    rng = random.Random(22)
    cohen_seen = set()
    for _ in range(20):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        flipped = [pairs[i] if rng.random() < 0.5 else pairs[i][::-1] for i in order]
        assert pooled_agreement(flipped, units=order) == first
        yes = [(a == "S", b == "S") for a, b in flipped if "U" not in (a, b)]
        cohen_seen.add(cohen_kappa(Confusion(tp=yes.count((True, True)), fp=yes.count((False, True)),
                                             fn=yes.count((True, False)), tn=yes.count((False, False)))))
    assert len(cohen_seen) > 1  # the same pairs in another order do move Cohen's kappa: the test can fail


def test_pooled_agreement_counts_a_third_category():
    counts = {("S", "S"): 40, ("N", "N"): 45, ("U", "U"): 5, ("S", "N"): 4, ("N", "S"): 3, ("S", "U"): 2,
              ("U", "N"): 1}
    pooled = pooled_agreement(_pairs(counts))
    assert pooled["categories"] == ["N", "S", "U"] and pooled["agreement"] == 0.9
    # shares S 89/200, N 98/200, U 13/200: chance 0.44235, pi = (0.9 - 0.44235) / 0.55765 = 0.8207
    assert pooled["kappa"] == round(_scotts_pi(counts), 3) == 0.821


def test_the_kappa_interval_is_the_jackknife_over_episodes():
    """The interval's standard error against a leave-one-episode-out loop written here with statsmodels' own
    fleiss_kappa; an episode labelled three times leaves with its three pairs."""
    import numpy as np
    from statsmodels.stats.inter_rater import fleiss_kappa

    pairs = _pairs({("S", "S"): 6, ("N", "N"): 4, ("S", "N"): 2, ("N", "S"): 1})
    units = list(range(len(pairs)))
    pairs += [("S", "S"), ("S", "N"), ("S", "N")]  # episode 99: labelled S, S, N by three reviewers
    units += [99, 99, 99]
    pooled = pooled_agreement(pairs, units=units)

    def kappa(of: list[tuple[str, str]]) -> float:
        return fleiss_kappa(np.array([[p.count("N"), p.count("S")] for p in of]))

    whole = kappa(pairs)
    left_out = [kappa([p for p, u in zip(pairs, units, strict=True) if u != unit]) for unit in sorted(set(units))]
    m = len(left_out)
    se = (sum((k - sum(left_out) / m) ** 2 for k in left_out) * (m - 1) / m) ** 0.5
    assert pooled["kappa"] == round(whole, 3)
    assert pooled["kappa_ci"] == (round(whole - 1.959963984540054 * se, 3), round(whole + 1.959963984540054 * se, 3))


def test_pooled_agreement_without_pairs_or_with_one_category_has_no_kappa():
    assert pooled_agreement([])["kappa"] is None and pooled_agreement([])["pairs"] == 0
    same = pooled_agreement([("S", "S")] * 4)
    assert same["agreement"] == 1.0 and same["kappa"] is None


@pytest.mark.parametrize("pairs, units, why", [
    ([("S", "N")], [1], "one episode labelled twice: an interval needs two or more"),
    ([("S", "S"), ("N", "N"), ("S", "S"), ("N", "N")], [1, 2, 3, 4], "no spread"),
    ([("S", "S")] * 5 + [("S", "N")], [1, 2, 3, 4, 5, 6], "leaves labels of a single kind"),
    ([("S", "S")] * 3, [1, 2, 3], "kappa is undefined"),
    ([], [], "no episode was labelled twice"),
])
def test_a_kappa_without_an_interval_says_why(pairs, units, why):
    """One pair gave "0.0 – 0.0" as if kappa were known exactly; no interval of zero width is claimed now."""
    pooled = pooled_agreement(pairs, units=units)
    assert pooled["kappa_ci"] is None and why in pooled["kappa_ci_why"]


def test_a_kappa_with_an_interval_has_nothing_to_explain():
    pooled = pooled_agreement(_pairs({("S", "S"): 6, ("N", "N"): 4, ("S", "N"): 2, ("N", "S"): 1}))
    assert pooled["kappa_ci"] is not None and pooled["kappa_ci"][0] < pooled["kappa_ci"][1]
    assert pooled["kappa_ci_why"] == ""
