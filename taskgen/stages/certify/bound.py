"""The certificate's statistics over strata of counts: a lower confidence bound on the true successes of a finite
population, the estimate, where the next labels go, and how many more are likely needed.

The bound is a confidence sequence, valid at every moment of the labelling at once, not only at a sample size fixed
in advance: a researcher labels until the panel says "certified", and the next label's stratum depends on the labels
so far, so a bound valid only for a fixed n would certify too often (optional stopping). Each stratum is a finite
population of N episodes, K of them true successes, labelled in a random order drawn once, so its first n labels are
a simple random sample without replacement. For one stratum, the ratio of a prior to the posterior on K (beta-binomial,
uniform prior) is a nonnegative martingale under the true K (Waudby-Smith and Ramdas, "Confidence sequences for
sampling without replacement", NeurIPS 2020, section 3); the product over strata is one too, whichever stratum is
labelled next, so by Ville's inequality every vector (K_1..K_H) with product < 1/alpha holds the truth at all times
with probability >= 1 - alpha. The lower bound is the smallest sum of K over that set, taken from below by its
Lagrangian dual (always <= the true minimum, so the bound stays valid). A stratum labelled in full is a census: its
K is known. No normal approximation anywhere; scipy's beta-binomial gives the probabilities.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from scipy import special

PRIOR = (1.0, 1.0)  # beta-binomial prior on each stratum's K: uniform, fixed before any label
ALLOCATION_PRIOR = (1.0, 1.0)  # Laplace's rule for a stratum's spread when it has few or no labels yet
METHOD = "stratified WoR confidence sequence (Waudby-Smith & Ramdas 2020), product martingale, Ville"
METHOD_REFERENCE = ("I. Waudby-Smith and A. Ramdas, Confidence sequences for sampling without replacement, "
                    "NeurIPS 2020 (prior-posterior-ratio martingale, section 3); J. Ville, 1939")


@dataclass(frozen=True)
class StratumCount:
    """One stratum of the frame: its size, the labels of its design prefix, and how many of those were successes."""

    size: int
    labelled: int
    successes: int

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.labelled <= self.size:
            raise ValueError(f"a stratum needs 0 <= successes <= labelled <= size, not {self}")

    @property
    def census(self) -> bool:
        return self.labelled == self.size

    def flipped(self) -> StratumCount:
        """The same stratum counting failures: an upper bound on successes is a lower bound on failures."""
        return replace(self, successes=self.labelled - self.successes)


def betabinom_logpmf(k: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    """log P(K = k) for K ~ beta-binomial(n, a, b): scipy.stats.betabinom.logpmf's value (a test checks it), from
    scipy.special directly, which skips that method's per-call argument checks (most of a bound's time)."""
    return (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
            + special.betaln(k + a, n - k + b) - special.betaln(a, b))


@lru_cache(maxsize=512)
def _log_ratio(stratum: StratumCount) -> tuple[np.ndarray, np.ndarray]:
    """Every K the stratum's labels allow, and log(prior(K) / posterior(K)) at each."""
    n_left = stratum.size - stratum.labelled
    ks = np.arange(stratum.successes, stratum.successes + n_left + 1, dtype=float)
    a, b = PRIOR
    prior = betabinom_logpmf(ks, stratum.size, a, b)
    posterior = betabinom_logpmf(ks - stratum.successes, n_left, a + stratum.successes,
                                 b + stratum.labelled - stratum.successes)
    return ks, prior - posterior


def successes_lower(strata: Sequence[StratumCount], *, confidence: float) -> int:
    """A lower bound on the frame's true successes, valid at every moment of a design's labelling at once."""
    if not 0 < confidence < 1:
        raise ValueError(f"the confidence must be between 0 and 1, not {confidence}")
    budget = math.log(1 / (1 - confidence))
    known = [s for s in strata if s.labelled]  # a stratum without labels allows K = 0 at no cost
    curves = [_log_ratio(s) for s in known]
    floor = sum(s.successes for s in known)
    if not curves:
        return 0
    slack = budget - sum(float(g.min()) for _, g in curves)
    curves = [_useful(ks, g, g.min() + slack) for ks, g in curves]

    grid = np.linspace(-15.0, 20.0, 71)  # log lambda: the dual is concave in lambda, so a grid and a finer one
    for _ in range(2):                   # around its best point find its top; any lambda gives a valid bound
        values = _dual(curves, np.exp(grid), budget)
        top = int(np.argmax(values))
        step = grid[1] - grid[0]
        grid_best = float(values[top])
        grid = np.linspace(grid[top] - step, grid[top] + step, 41)
    return max(floor, math.ceil(max(grid_best, float(np.max(_dual(curves, np.exp(grid), budget)))) - 1e-7))


def _useful(ks: np.ndarray, g: np.ndarray, ceiling: float) -> tuple[np.ndarray, np.ndarray]:
    """The part of a stratum's curve a minimum can use: K inside the set (g <= ceiling) and no larger than where g
    is least (past it, both K and g only grow)."""
    keep = (g <= ceiling) & (ks <= ks[int(np.argmin(g))])
    return ks[keep], g[keep]


def _dual(curves: list[tuple[np.ndarray, np.ndarray]], lams: np.ndarray, budget: float) -> np.ndarray:
    """The Lagrangian dual of "smallest sum of K with sum of log-ratios <= budget" at each lambda."""
    total = -lams * budget
    for ks, g in curves:
        total = total + np.min(ks[:, None] + g[:, None] * lams[None, :], axis=0)
    return total


def successes_upper(strata: Sequence[StratumCount], *, confidence: float) -> int:
    """An upper bound on the frame's true successes, valid in the same way (the failures' lower bound, mirrored)."""
    return sum(s.size for s in strata) - successes_lower([s.flipped() for s in strata], confidence=confidence)


def successes_estimate(strata: Sequence[StratumCount]) -> float | None:
    """The frame's true successes, estimated without bias: sum over strata of N_h times the prefix's success rate
    (each label weighted by the inverse of its inclusion probability n_h / N_h); None while a non-empty stratum has
    no label."""
    if any(s.size and not s.labelled for s in strata):
        return None
    return sum(s.size * s.successes / s.labelled for s in strata if s.size)


Z_ALLOCATION = 1.645  # only to rank where the next label helps most; the bound itself uses no normal approximation


def _rate(stratum: StratumCount) -> float:
    """The stratum's success rate as the allocation sees it: its labels so far with Laplace's prior (0.5 unseen)."""
    a, b = ALLOCATION_PRIOR
    return (stratum.successes + a) / (stratum.labelled + a + b)


def _likely_share(strata: Sequence[StratumCount], labelled: Sequence[float], rates: Sequence[float]) -> float:
    """Roughly where the lower bound on the population's share of successes would be with `labelled` labels per
    stratum at these rates: the estimate less z standard errors (Neyman's variance, finite population), over the
    episodes left once the labelled failures have left the export. Only ranks allocations."""
    variance, successes, rejected, size = 0.0, 0.0, 0.0, 0
    for stratum, n, rate in zip(strata, labelled, rates, strict=True):
        size += stratum.size
        successes += stratum.size * rate
        rejected += (stratum.labelled - stratum.successes) + (n - stratum.labelled) * (1 - rate)
        if n < stratum.size:
            if n == 0:
                return -math.inf
            variance += stratum.size ** 2 * rate * (1 - rate) * (1 / n - 1 / stratum.size)
    kept = max(1.0, size - rejected)
    return (successes - Z_ALLOCATION * math.sqrt(variance)) / kept


def _best_stratum(strata: Sequence[StratumCount], labelled: list[float], rates: list[float], step: float) -> int | None:
    """The stratum whose next `step` labels would raise the likely bound most; a stratum without labels first
    (the largest by N_h s_h: Neyman's weight, with Laplace's prior for the spread)."""
    open_strata = [h for h, s in enumerate(strata) if labelled[h] < s.size]
    if not open_strata:
        return None
    unseen = [h for h in open_strata if labelled[h] == 0]
    if unseen:
        return max(unseen, key=lambda h: strata[h].size * math.sqrt(rates[h] * (1 - rates[h])))

    def after(h: int) -> float:
        trial = list(labelled)
        trial[h] = min(strata[h].size, trial[h] + step)
        return _likely_share(strata, trial, rates)

    return max(open_strata, key=after)


def allocate_next(strata: Sequence[StratumCount], *, count: int) -> list[int]:
    """The strata of the next `count` labels, in order: each label goes where it raises the likely lower bound
    most (Neyman's variance term, and the failures it is likely to take out of the export), a stratum without
    labels first; the rates come from the labels so far with Laplace's prior (the labels to come are not known)."""
    labelled: list[float] = [s.labelled for s in strata]
    rates = [_rate(s) for s in strata]
    order: list[int] = []
    for _ in range(count):
        best = _best_stratum(strata, labelled, rates, 1)
        if best is None:
            break
        order.append(best)
        labelled[best] += 1
    return order


def _projected(strata: Sequence[StratumCount], extra: int) -> list[StratumCount]:
    """The strata after `extra` more labels shared out as `allocate_next` would (in about 40 chunks), each
    stratum's new labels succeeding at its current smoothed rate."""
    labelled: list[float] = [s.labelled for s in strata]
    rates = [_rate(s) for s in strata]
    left, step = extra, max(1, extra // 40)
    while left > 0:
        best = _best_stratum(strata, labelled, rates, min(step, left))
        if best is None:
            break
        took = min(step, left, strata[best].size - int(labelled[best]))
        labelled[best] += took
        left -= took
    return [StratumCount(s.size, int(n), min(int(n), s.successes + round(rate * (int(n) - s.labelled))))
            for s, n, rate in zip(strata, labelled, rates, strict=True)]


def labels_needed(strata: Sequence[StratumCount], *, reached: Callable[[list[StratumCount]], bool]) -> int | None:
    """About how many more labels (allocated by the design, the strata's rates holding) make `reached` true of the
    projected strata: 0 when it holds now, None when even every episode labelled would not do."""
    if reached(list(strata)):
        return 0
    room = sum(s.size - s.labelled for s in strata)
    if not room or not reached(_projected(strata, room)):
        return None
    low, high = 0, 1
    while high < room and not reached(_projected(strata, high)):
        low, high = high, min(room, high * 2)
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reached(_projected(strata, mid)) else (mid, high)
    return high



def design_walk(strata: Sequence[Sequence[bool | None]]) -> tuple[list[StratumCount], int | None]:
    """The labels the design has drawn: each stratum's episodes in its random order (True/False: the truth a label
    gave, None: no label yet), walked as the design serves them (allocate_next after each label) until it reaches
    an episode without a label, which is the next to serve (its stratum is returned; None when all are done).

    A label given elsewhere (the audit's riskiest first, browsing) counts only once the walk reaches it, and the
    walk's choice of stratum never depends on which episodes happen to be labelled: so the counts are the design's
    own sample path, and the bound, valid at every moment of that path, holds wherever the walk stops."""
    counts = [StratumCount(len(truths), 0, 0) for truths in strata]
    while True:
        order = allocate_next(counts, count=1)
        if not order:
            return counts, None
        h = order[0]
        truth = strata[h][counts[h].labelled]
        if truth is None:
            return counts, h
        counts[h] = StratumCount(counts[h].size, counts[h].labelled + 1, counts[h].successes + truth)
