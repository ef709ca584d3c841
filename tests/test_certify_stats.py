"""The certificate's statistics on simulated populations of known truth (taskgen/stages/certify/bound.py): the lower
bound holds the truth at every look of a labelling that stops once certified, at least as often as its confidence;
a normal-approximation bound fails the same test; the estimate stays unbiased when labels arrive in risk order."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from taskgen.stages.certify.bound import (
    StratumCount,
    _hull_least,
    _log_capital,
    _log_draws,
    _lower_hull,
    allocate_next,
    betabinom_logpmf,
    counts_of,
    design_walk,
    labels_needed,
    successes_estimate,
    successes_lower,
    successes_upper,
)
from taskgen.stages.certify.simulate import labelling_walk, population_draw

# (sizes, true success rates) per stratum, riskiest first: tiers that separate false positives well, not at all,
# small strata, one large stratum; overall precision from 0.78 to 0.96
SCENARIOS = {
    "tiers separate": ([20, 30, 60, 250], [0.2, 0.5, 0.8, 0.97]),
    "tiers do not separate": ([40, 40, 40, 200], [0.88, 0.88, 0.88, 0.88]),
    "small strata": ([3, 5, 8, 40], [0.0, 0.4, 0.75, 0.9]),
    "one large stratum": ([30, 1200], [0.5, 0.92]),
    "high precision": ([10, 15, 300], [0.6, 0.9, 0.98]),
    "just below the target": ([25, 400], [0.7, 0.9]),
}
WALKS = 35  # per scenario: 210 walks; bench/certify.py --coverage runs thousands


def _count(size: int, labelled: int, successes: int) -> StratumCount:
    """A stratum with these counts, its failures spread evenly through its labels."""
    return counts_of(size, [(i + 1) * successes // labelled > i * successes // labelled for i in range(labelled)])


def _miss_rate(bound=None, *, seed: int, certified: dict | None = None) -> dict[str, float]:
    rng = random.Random(seed)
    rates = {}
    for name, (sizes, truth) in SCENARIOS.items():
        extra = {"bound": bound} if bound else {}
        walks = [labelling_walk(population_draw(sizes, truth, rng), target=0.9, look_every=5, max_labels=160, **extra)
                 for _ in range(WALKS)]
        rates[name] = sum(w.missed for w in walks) / len(walks)
        if certified is not None:
            certified[name] = sum(w.certified for w in walks) / len(walks)
    return rates


def test_the_bound_holds_the_truth_at_every_look_at_least_as_often_as_its_confidence():
    certified: dict[str, float] = {}
    rates = _miss_rate(seed=2026, certified=certified)
    assert certified["high precision"] > 0.75 and certified["small strata"] > 0.9  # not a bound that says nothing
    overall = sum(rates.values()) / len(rates)
    monte_carlo = 3 * math.sqrt(0.05 * 0.95 / (WALKS * len(rates)))
    assert overall <= 0.05 + monte_carlo, rates
    assert max(rates.values()) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / WALKS), rates


def _normal_bound(strata: list[StratumCount], confidence: float) -> int:
    """The textbook stratified estimate minus z standard errors: what the coverage test must catch."""
    estimate, variance = 0.0, 0.0
    for s in strata:
        if not s.labelled:
            continue
        p = s.successes / s.labelled
        estimate += s.size * p
        if s.labelled > 1:
            variance += s.size ** 2 * (1 - s.labelled / s.size) * p * (1 - p) / (s.labelled - 1)
    return math.floor(estimate - stats.norm.ppf(confidence) * math.sqrt(variance))


def test_the_coverage_test_catches_a_normal_approximation():
    rates = _miss_rate(_normal_bound, seed=2026)
    assert sum(rates.values()) / len(rates) > 0.15, rates


def test_a_census_is_exact_and_a_stratum_without_labels_may_hold_no_success():
    assert successes_lower([_count(12, 12, 9)], confidence=0.99) == 9
    assert successes_upper([_count(12, 12, 9)], confidence=0.99) == 9
    assert successes_lower([_count(12, 12, 9), StratumCount(50, 0, 0)], confidence=0.95) == 9
    assert successes_upper([_count(12, 12, 9), StratumCount(50, 0, 0)], confidence=0.95) == 59
    assert successes_estimate([_count(12, 12, 9), StratumCount(50, 0, 0)]) is None
    assert successes_estimate([_count(10, 2, 1), _count(50, 5, 5)]) == pytest.approx(55)


def test_more_labels_and_a_lower_confidence_give_a_higher_bound():
    few = successes_lower([_count(300, 40, 38)], confidence=0.95)
    more = successes_lower([_count(300, 120, 114)], confidence=0.95)
    looser = successes_lower([_count(300, 40, 38)], confidence=0.8)
    assert few < more and few < looser and more <= 300 - 6


def test_the_beta_binomial_is_scipys():
    ks = np.arange(0, 41, dtype=float)
    assert np.allclose(betabinom_logpmf(ks, 40, 2.5, 1.5), stats.betabinom.logpmf(ks, 40, 2.5, 1.5))


def test_labels_go_first_to_strata_without_any_then_where_the_spread_is():
    strata = [StratumCount(20, 0, 0), _count(200, 10, 10), _count(200, 10, 5)]
    order = allocate_next(strata, count=12)
    assert order[0] == 0
    assert order.count(2) > order.count(1)  # a 50/50 stratum needs labels more than one that is all successes
    assert allocate_next([_count(1000, 10, 9), _count(50, 10, 9)], count=10).count(0) == 10  # N_h s_h
    assert allocate_next([_count(3, 2, 1)], count=5) == [0]  # never past a stratum's size


def test_the_dual_read_off_the_lower_hull_is_the_least_over_every_point():
    """The dual reads each stratum's curve on its lower hull: for every lambda, the same least K + lambda g as over
    all the points, on convex curves, bumpy ones, flat ones and real capitals."""
    rng = np.random.default_rng(26)
    lams = np.exp(np.linspace(-15.0, 20.0, 71))
    curves = [(np.arange(50.0), rng.normal(size=50)), (np.arange(300.0), (np.arange(300.0) - 120) ** 2 / 900),
              (np.arange(10.0), np.zeros(10)), (np.array([4.0]), np.array([1.5])),
              (np.sort(rng.choice(5000, 400, replace=False)).astype(float), rng.exponential(size=400)),
              _log_capital(counts_of(3000, [True] * 40 + [False] * 3), 0.0)]
    for ks, g in curves:
        hull = _lower_hull(ks, g)
        assert len(hull[0]) <= len(ks)
        assert np.allclose(_hull_least(*hull, lams), np.min(ks[:, None] + g[:, None] * lams[None, :], axis=0),
                           rtol=1e-12, atol=1e-9)


def test_the_log_factorial_table_gives_scipys_values():
    """Draws without replacement and the bets' beta-binomial prior, looked up in the table of log-factorials, agree
    with scipy's log-gamma and scipy.stats' hypergeometric and beta-binomial."""
    left, s, f = 900, 7, 3
    ks = np.arange(left + 1)
    from scipy import special
    direct = (special.gammaln(ks + 1) - special.gammaln(ks - s + 1) + special.gammaln(left - ks + 1)
              - special.gammaln(left - ks - f + 1) - special.gammaln(left + 1) + special.gammaln(left - s - f + 1))
    drawn = _log_draws(0, left + 1, left, s, f)
    possible = (ks >= s) & (left - ks >= f)
    assert np.all(np.isneginf(drawn[~possible]))
    assert np.allclose(drawn[possible], direct[possible], rtol=1e-12)
    assert np.allclose(betabinom_logpmf(ks, left, 3.0, 4.0), stats.betabinom.logpmf(ks, left, 3, 4), rtol=1e-9)


def test_labels_needed_is_zero_when_reached_and_none_when_out_of_reach():
    strata = [_count(200, 20, 19)]
    lower_reaches = lambda target: lambda s: successes_lower(s, confidence=0.95) >= target * 200  # noqa: E731
    assert labels_needed(strata, reached=lower_reaches(0.5)) == 0
    more = labels_needed(strata, reached=lower_reaches(0.85))
    assert more and 0 < more < 180
    assert labels_needed(strata, reached=lower_reaches(0.99)) is None  # 5% failures: 0.99 is never there


def _risk_ordered_population(rng: random.Random, size: int = 400) -> list[bool]:
    """Judged successes in risk order, riskiest first: the first fifth are false positives half the time, the rest
    5% of the time."""
    return [rng.random() > (0.5 if i < size // 5 else 0.05) for i in range(size)]


def test_the_estimate_stays_unbiased_when_labels_arrive_in_risk_order():
    """The audit labels the riskiest 60 first; the design then labels 40 in its random order. Counting every label
    as a random draw (the old estimate) is biased low; the design's prefix is not."""
    rng = random.Random(7)
    old, new, truth = [], [], []
    for _ in range(400):
        population = _risk_ordered_population(rng)
        labelled = set(range(60))  # the audit: riskiest first
        order = list(range(len(population)))
        rng.shuffle(order)  # the design's random order, drawn once
        labelled |= set([i for i in order if i not in labelled][:40])
        old.append(sum(population[i] for i in labelled) / len(labelled))
        (count,), _ = design_walk([[population[i] if i in labelled else None for i in order]])
        new.append(successes_estimate([count]) / len(population))
        truth.append(sum(population) / len(population))
    error = 3 * np.std(np.array(new) - truth) / math.sqrt(len(new))
    assert abs(np.mean(new) - np.mean(truth)) <= error
    assert np.mean(truth) - np.mean(old) > 0.08  # the old estimate, by about 0.1: far outside its own error


def test_the_walk_counts_labels_given_elsewhere_only_once_the_design_reaches_them():
    """Stratum 1's first episodes were labelled by someone else; the design serves the larger stratum 0 first
    and stops at its first episode without a label, so none of them counts yet."""
    counts, next_stratum = design_walk([[None] * 30, [False, False, True, None, None]])
    assert next_stratum == 0 and [c.labelled for c in counts] == [0, 0]
    counts, next_stratum = design_walk([[True] + [None] * 29, [False, False, True, None, None]])
    assert [c.labelled for c in counts] == [1, 1] and next_stratum == 0  # stratum 1's next is not the design's turn
    counts, next_stratum = design_walk([[True] * 30, [False, False, True, None, None]])
    assert counts[1].labelled == 3 and next_stratum == 1  # once the walk turns to stratum 1, its labels count
