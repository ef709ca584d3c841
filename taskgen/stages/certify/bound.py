"""The certificate's statistics over strata of counts: a lower confidence bound on the true successes of a finite
population, the estimate, where the next labels go, and how many more are likely needed.

The bound is a confidence sequence, valid at every moment of the labelling at once, not only at a sample size fixed
in advance: a researcher labels until the panel says "certified", and the next label's stratum depends on the labels
so far, so a bound valid only for a fixed n would certify too often (optional stopping). Each stratum is a finite
population of N episodes, K of them true successes, labelled in a random order drawn once, so its labels are draws
without replacement. For each K, a stratum's capital is a bettor's wealth against "K successes" (Waudby-Smith and
Ramdas, "Confidence sequences for sampling without replacement", NeurIPS 2020, section 4: betting): each label is
a bet whose odds are the null's own chance of a success among the episodes left, (K - successes so far) / (episodes
left), staked on a forecast; the wealth is the forecast's probability of the labels over the null's (a likelihood
ratio), a nonnegative martingale with mean 1 whatever K is true. The forecast (BET_*) bets one way only (more
successes than the null: only a lower bound is wanted), learns from the stratum's first labels, and bets nothing in
a stratum those labels show to be mostly failures (labelled in full, it is a census, where any bet only loses) nor
on a stratum's last quarter (where the null knows what is left). The product over strata is a martingale too,
whichever stratum is labelled next, so by Ville's inequality every vector (K_1..K_H) with product < 1/alpha holds
the truth at all times with probability >= 1 - alpha. The lower bound is the smallest sum of K over that set, taken
from below by its Lagrangian dual (always <= the true minimum, so the bound stays valid). A stratum labelled in
full is a census: its K is known. No normal approximation anywhere; scipy's log-gamma gives the probabilities.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

ALLOCATION_PRIOR = (1.0, 1.0)  # Laplace's rule for a stratum's spread when it has few or no labels yet
METHOD = "stratified WoR betting confidence sequence (Waudby-Smith & Ramdas 2020), product martingale, Ville"
METHOD_REFERENCE = ("I. Waudby-Smith and A. Ramdas, Confidence sequences for sampling without replacement, "
                    "NeurIPS 2020 (betting, section 4); J. Ville, 1939")


BET_DELAY = 5  # a stratum bets nothing on its first labels: their successes decide whether it bets, and its prior
BET_FROM = 0.5  # it bets when those labels show at least this share of successes (Laplace's rule); a certificate's
# stratum mostly of failures is labelled in full instead (a census, where a bet only loses); an interval bets always
BET_UNTIL = 0.75  # and stops betting once this share of it is labelled (the null knows what is left: bets only lose)


def bet_stop(size: int) -> int:
    """The label after which a stratum of this size bets no more."""
    return max(min(BET_DELAY, size), math.ceil(BET_UNTIL * size))


@dataclass(frozen=True)
class StratumCount:
    """One stratum of the frame: its size, the labels of its design prefix, how many of those were successes, and
    the successes among its first labels that decide its bets (`head`) and up to where it stops betting (`window`)."""

    size: int
    labelled: int
    successes: int
    head: int = 0  # successes among its first BET_DELAY labels
    window: int = 0  # successes among its first bet_stop(size) labels

    def __post_init__(self) -> None:
        if not 0 <= self.successes <= self.labelled <= self.size:
            raise ValueError(f"a stratum needs 0 <= successes <= labelled <= size, not {self}")
        head_labels, window_labels = min(self.labelled, BET_DELAY), min(self.labelled, bet_stop(self.size))
        if not (0 <= self.head <= head_labels and 0 <= self.window - self.head <= window_labels - head_labels
                and 0 <= self.successes - self.window <= self.labelled - window_labels):
            raise ValueError(f"a stratum's head and window hold the successes of its first {head_labels} and "
                             f"{window_labels} labels, not {self}")

    @property
    def census(self) -> bool:
        return self.labelled == self.size

    def labelled_with(self, success: bool) -> StratumCount:
        """The same stratum with its next label in the design's order."""
        n = self.labelled + 1
        return StratumCount(self.size, n, self.successes + success, self.head + (success and n <= BET_DELAY),
                            self.window + (success and n <= bet_stop(self.size)))

    def flipped(self) -> StratumCount:
        """The same stratum counting failures: an upper bound on successes is a lower bound on failures."""
        return replace(self, successes=self.labelled - self.successes,
                       head=min(self.labelled, BET_DELAY) - self.head,
                       window=min(self.labelled, bet_stop(self.size)) - self.window)


def counts_of(size: int, truths: Sequence[bool]) -> StratumCount:
    """A stratum's count from its labels in the design's order (True: a success)."""
    count = StratumCount(size, 0, 0)
    for truth in truths:
        count = count.labelled_with(bool(truth))
    return count


@lru_cache(maxsize=1)
def _special():
    """scipy.special, imported at the first bound rather than when Django starts: every process registers the
    stages (this module with them), and scipy's import was a fifth of a `taskgen judge` process's start."""
    from scipy import special

    return special


def betabinom_logpmf(k: np.ndarray, n: int, a: float, b: float) -> np.ndarray:
    """log P(K = k) for K ~ beta-binomial(n, a, b): scipy.stats.betabinom.logpmf's value (a test checks it), from
    scipy.special directly, which skips that method's per-call argument checks; with whole a and b (the bets' priors
    always are), from the table of log-factorials."""
    if float(a).is_integer() and float(b).is_integer():
        lf, k, a, b = _log_factorials(n + int(a) + int(b)), np.asarray(k, dtype=np.int64), int(a), int(b)
        return (lf[n] - lf[k] - lf[n - k] + lf[k + a - 1] + lf[n - k + b - 1] - lf[n + a + b - 1]
                - float(_special().betaln(a, b)))
    special = _special()
    return (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
            + special.betaln(k + a, n - k + b) - special.betaln(a, b))


def _log_factorials(largest: int) -> np.ndarray:
    """log(m!) for m = 0..largest at least: scipy's gammaln(m + 1), each the same value a direct call gives, read once
    (up to 2^20, or the next power of two past it) and looked up after (a stratum of 500,000 episodes asked log-gamma
    at ~20 arrays of its size per bound: 0.1-0.7 s; the lookups take a tenth of that)."""
    return _log_factorial_table(max(1 << 20, 1 << int(largest).bit_length()))


@lru_cache(maxsize=1)
def _log_factorial_table(size: int) -> np.ndarray:
    return _special().gammaln(np.arange(size + 1, dtype=float) + 1)


def _log_draws(first: int, count: int, left: int, drawn_successes: int, drawn_failures: int) -> np.ndarray:
    """log P(a given sequence of draws without replacement) from `left` episodes of which K are successes, for each K
    of first .. first + count - 1: [K]_s [N - K]_f / [N]_n in falling factorials (-inf where the draws are
    impossible); the K are consecutive, so each term is a slice of the log-factorial table."""
    value = np.full(count, -np.inf)
    low, high = max(first, drawn_successes), min(first + count - 1, left - drawn_failures)  # the possible K
    if low <= high:
        lf, k = _log_factorials(left), slice(low, high + 1)
        failures_left = lf[left - high:left - low + 1][::-1]  # log (N - K)! for each K
        failures_after = lf[left - high - drawn_failures:left - low - drawn_failures + 1][::-1]
        value[low - first:high - first + 1] = (lf[k] - lf[low - drawn_successes:high - drawn_successes + 1]
                                               + failures_left - failures_after
                                               - lf[left] + lf[left - drawn_successes - drawn_failures])
    return value


def _reverse_logcumsumexp(values: np.ndarray) -> np.ndarray:
    return np.logaddexp.accumulate(values[::-1])[::-1]


SMALL_STRATUM = 2_000  # curves of strata up to this size are kept by the thousand, larger ones by the four


def _log_capital(stratum: StratumCount, bet_from: float) -> tuple[np.ndarray, np.ndarray]:
    """Every K the stratum's labels allow, and the log of its wealth against each, kept per process: a thousand
    small curves (a simulation's walks ask for the same ones again and again: at most 32 MB), and the last four of
    larger strata (a forecast at a million episodes asks for ~150 curves of 300,000 points: kept by the thousand they
    held a web worker at 600 MB)."""
    return (_small_capital if stratum.size <= SMALL_STRATUM else _large_capital)(stratum, bet_from)


@lru_cache(maxsize=1024)
def _small_capital(stratum: StratumCount, bet_from: float) -> tuple[np.ndarray, np.ndarray]:
    return _capital_of(stratum, bet_from)


@lru_cache(maxsize=4)
def _large_capital(stratum: StratumCount, bet_from: float) -> tuple[np.ndarray, np.ndarray]:
    return _capital_of(stratum, bet_from)


def _capital_of(stratum: StratumCount, bet_from: float) -> tuple[np.ndarray, np.ndarray]:
    """Every K the stratum's labels allow, and the log of its wealth against each.

    The bets are on labels BET_DELAY+1 .. bet_stop(N), the forecast a mixture over what the episodes after the first
    BET_DELAY hold: R' successes with the prior their labels give (beta-binomial, Laplace's prior updated by the
    head), truncated to R' >= R, the null's own count there (one-sided: the null itself is in the mixture, so a
    census loses little). Wealth = mixture's probability of the bet labels / the null's."""
    ks = np.arange(stratum.successes, stratum.successes + stratum.size - stratum.labelled + 1, dtype=float)
    delay = min(BET_DELAY, stratum.size)
    bet_labels = min(stratum.labelled, bet_stop(stratum.size)) - delay
    head_failures = delay - stratum.head
    if bet_labels <= 0 or (stratum.head + 1) / (delay + 2) < bet_from:
        return ks, np.zeros_like(ks)
    left = stratum.size - delay
    drawn_successes = stratum.window - stratum.head
    drawn_failures = bet_labels - drawn_successes
    everything = np.arange(left + 1, dtype=float)  # R': successes among the episodes after the head
    prior = betabinom_logpmf(everything, left, 1.0 + stratum.head, 1.0 + head_failures)
    mixed = _reverse_logcumsumexp(prior + _log_draws(0, left + 1, left, drawn_successes, drawn_failures))
    mass = _reverse_logcumsumexp(prior)
    null = (ks - stratum.head).astype(int)  # R under each K
    wealth = (mixed[null] - mass[null]
              - _log_draws(stratum.successes - stratum.head, len(ks), left, drawn_successes, drawn_failures))
    return ks, wealth


def successes_lower(strata: Sequence[StratumCount], *, confidence: float, bet_from: float = BET_FROM) -> int:
    """A lower bound on the frame's true successes, valid at every moment of a design's labelling at once
    (`bet_from`: see BET_FROM; 0 bets in every stratum)."""
    if not 0 < confidence < 1:
        raise ValueError(f"the confidence must be between 0 and 1, not {confidence}")
    budget = math.log(1 / (1 - confidence))
    known = [s for s in strata if s.labelled]  # a stratum without labels allows K = 0 at no cost
    curves = [_log_capital(s, bet_from) for s in known]
    floor = sum(s.successes for s in known)
    if not curves:
        return 0
    slack = budget - sum(float(g.min()) for _, g in curves)
    curves = [_lower_hull(*_useful(ks, g, g.min() + slack)) for ks, g in curves]

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
    is least (past it, both K and g are larger, so no vector there has a smaller sum)."""
    keep = (g <= ceiling) & (ks <= ks[int(np.argmin(g))])
    return ks[keep], g[keep]


def _dual(curves: list[tuple[np.ndarray, np.ndarray]], lams: np.ndarray, budget: float) -> np.ndarray:
    """The Lagrangian dual of "smallest sum of K with sum of log-wealths <= budget" at each lambda: each stratum's
    least K + lambda g, read off its curve's lower hull (`_lower_hull`, `_hull_least`)."""
    total = -lams * budget
    for ks, g in curves:
        total = total + _hull_least(ks, g, lams)
    return total


def _lower_hull(ks: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The curve's points on its lower convex hull, by K: K + lambda g with lambda > 0 is least at one of them. A point
    on or above the chord of its two neighbours is never the only least one, so it goes; passes repeat until none
    is left (a point and its left neighbour never go in one pass: each goes beside two that stay)."""
    keep = np.arange(len(ks))
    while len(keep) > 2:
        k, v = ks[keep], g[keep]
        above = (v[1:-1] - v[:-2]) * (k[2:] - k[:-2]) >= (v[2:] - v[:-2]) * (k[1:-1] - k[:-2])
        drop = above & ~np.concatenate(([False], above[:-1]))
        if not drop.any():
            break
        keep = np.delete(keep, np.flatnonzero(drop) + 1)
    return ks[keep], g[keep]


def _hull_least(ks: np.ndarray, g: np.ndarray, lams: np.ndarray, window: int = 2) -> np.ndarray:
    """min over the hull's points of K + lambda g, for each lambda: along a lower hull the slopes rise, so the least
    point is where the slope passes -1/lambda (a binary search); its neighbours are read too, against rounding."""
    if len(ks) == 1:
        return ks[0] + lams * g[0]
    slopes = np.diff(g) / np.diff(ks)
    at = np.searchsorted(slopes, -1.0 / lams, side="left")
    near = np.clip(at[None, :] + np.arange(-window, window + 1)[:, None], 0, len(ks) - 1)
    return np.min(ks[near] + g[near] * lams[None, :], axis=0)


def successes_upper(strata: Sequence[StratumCount], *, confidence: float, bet_from: float = BET_FROM) -> int:
    """An upper bound on the frame's true successes, valid in the same way (the failures' lower bound, mirrored)."""
    return sum(s.size for s in strata) - successes_lower([s.flipped() for s in strata], confidence=confidence,
                                                         bet_from=bet_from)


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
    return [_extended(s, int(n), rate) for s, n, rate in zip(strata, labelled, rates, strict=True)]


def _extended(stratum: StratumCount, labelled: int, rate: float) -> StratumCount:
    """The stratum with `labelled` labels, those still to come succeeding at `rate`."""
    def successes_within(first: int, known: int) -> int:
        return known if stratum.labelled >= first else known + round(rate * (min(labelled, first) - stratum.labelled))

    return StratumCount(stratum.size, labelled, successes_within(labelled, stratum.successes),
                        successes_within(BET_DELAY, stratum.head),
                        successes_within(bet_stop(stratum.size), stratum.window))


NEEDED_PRECISION = 50  # labels_needed is found to within 1/50 of itself (2%): a forecast, each step a bound's cost


def labels_needed(strata: Sequence[StratumCount], *, reached: Callable[[list[StratumCount]], bool]) -> int | None:
    """About how many more labels (allocated by the design, the strata's rates holding) make `reached` true of the
    projected strata, to within 2% and never fewer than the projection needs: 0 when it holds now, None when even
    every episode labelled would not do."""
    if reached(list(strata)):
        return 0
    room = sum(s.size - s.labelled for s in strata)
    if not room or not reached(_projected(strata, room)):
        return None
    low, high = 0, 1
    while high < room and not reached(_projected(strata, high)):
        low, high = high, min(room, high * 2)
    while high - low > max(1, high // NEEDED_PRECISION):
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
        counts[h] = counts[h].labelled_with(truth)
