"""The arithmetic of validate: the reference's figures, F1, Cohen's kappa, Wilson intervals, and estimates of a
whole run's precision from a human-labelled random sample. Pure functions over counts, so they are tested against
known values and simulations without a database.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval

REFERENCE_KEYS = ("episodes", "agreement", "verifier_pass", "judge_pass", "precision", "recall", "tp", "fp", "fn", "tn")


@dataclass(frozen=True)
class Confusion:
    """Counts of (truth, judge) pairs: tp = both say success, fp = judge only, fn = truth only, tn = neither."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def __add__(self, other: Confusion) -> Confusion:
        return Confusion(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


def reference_figures(c: Confusion) -> dict:
    """The reference's validate line, key for key and rounding for rounding (max(1, ...) keeps empty cells at 0)."""
    n = c.n
    return {
        "episodes": n,
        "agreement": round((c.tp + c.tn) / max(1, n), 3),
        "verifier_pass": c.tp + c.fn,
        "judge_pass": c.tp + c.fp,
        "precision": round(c.tp / max(1, c.tp + c.fp), 3),
        "recall": round(c.tp / max(1, c.tp + c.fn), 3),
        "tp": c.tp,
        "fp": c.fp,
        "fn": c.fn,
        "tn": c.tn,
    }


def f1_score(c: Confusion) -> float | None:
    """Harmonic mean of precision and recall; None when there is no success on either side to score."""
    denominator = 2 * c.tp + c.fp + c.fn
    return round(2 * c.tp / denominator, 3) if denominator else None


def cohen_kappa(c: Confusion) -> float | None:
    """Cohen's kappa of two yes/no raters (truth and judge); None when chance agreement is total (kappa undefined)."""
    n = c.n
    if not n:
        return None
    observed = (c.tp + c.tn) / n
    yes_a, yes_b = (c.tp + c.fn) / n, (c.tp + c.fp) / n
    expected = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if expected >= 1:
        return None
    return _rounded((observed - expected) / (1 - expected), 3)


def _rounded(value: float, digits: int) -> float:
    """`round`, without the "-0.0" a tiny negative rounds to (a kappa of zero printed as -0.0)."""
    return round(value, digits) + 0.0


KAPPA_POOLED = "Fleiss' kappa (Scott's pi for two labels an episode)"


def pooled_agreement(pairs: list[tuple[str, str]], *, units: list[int] | None = None, z: float = Z95) -> dict:
    """Agreement and a chance-corrected kappa over pooled pairs of labels in any number of categories, as papers
    report inter-annotator agreement: one figure over every episode labelled twice (three labels make three pairs).

    Both are order-free: a pair is its two labels, whichever was given first. The kappa is Fleiss' (1971), each pair
    a subject rated twice (statsmodels' `fleiss_kappa`); with two labels an episode it is Scott's (1955) pi, whose
    chance agreement comes from the pooled share of each category. Cohen's kappa would give each "rater" its own
    shares, but pooled pairs have no fixed first and second rater, so Cohen's changes with which label counts as
    which. The agreement's interval is Wilson's; kappa's is normal with the jackknife's standard error, leaving out
    one unit at a time (`units[i]`, the episode of pair i: its pairs go out together). Kappa is None when chance
    agreement is total (one category only). Where there is no interval, `kappa_ci_why` says why.
    """
    n = len(pairs)
    categories = sorted({c for pair in pairs for c in pair})
    out = {"pairs": n, "agree": sum(a == b for a, b in pairs), "categories": categories, "statistic": KAPPA_POOLED,
           "agreement": None, "agreement_ci": None, "kappa": None, "kappa_ci": None,
           "kappa_ci_why": "no episode was labelled twice"}
    if not n:
        return out
    out.update(agreement=_rounded(out["agree"] / n, 3), agreement_ci=wilson_interval(out["agree"], n, z=z))
    if len(categories) < 2:
        out["kappa_ci_why"] = "every label is the same, so kappa is undefined (chance agreement is total)"
        return out
    import numpy as np  # numpy and statsmodels load only when a kappa is computed, not with every page
    from statsmodels.stats.inter_rater import fleiss_kappa

    table = np.array([[pair.count(c) for c in categories] for pair in pairs], dtype=float)
    kappa = float(fleiss_kappa(table, method="fleiss"))
    interval, why = _kappa_jackknife_interval(table, list(range(n)) if units is None else units, kappa, z)
    out.update(kappa=_rounded(kappa, 3), kappa_ci=interval, kappa_ci_why=why)
    return out


def _kappa_jackknife_interval(table, units: list[int], kappa: float, z: float) -> tuple[tuple | None, str]:
    """kappa -/+ z times the jackknife standard error over units, and ""; or None and why there is none: fewer than
    two units, a unit whose leaving leaves a single category, or no spread at all among the left-out kappas (an
    interval of zero width would claim a certainty a few episodes cannot give)."""
    import numpy as np

    groups = np.unique(np.asarray(units), return_inverse=True)[1]
    m = int(groups.max()) + 1
    if m < 2:
        return None, "one episode labelled twice: an interval needs two or more"
    agree = (table.max(axis=1) == 2).astype(float)
    counts = np.zeros((m, table.shape[1]))
    np.add.at(counts, groups, table)
    rest_pairs = len(table) - np.bincount(groups, minlength=m)
    rest_observed = (agree.sum() - np.bincount(groups, weights=agree, minlength=m)) / rest_pairs
    rest_expected = (((table.sum(axis=0) - counts) / (2 * rest_pairs)[:, None]) ** 2).sum(axis=1)
    if (rest_expected >= 1).any():
        return None, "leaving one episode out leaves labels of a single kind, so kappa cannot be re-estimated"
    left_out = (rest_observed - rest_expected) / (1 - rest_expected)
    se = math.sqrt((m - 1) / m * float(((left_out - left_out.mean()) ** 2).sum()))
    if se < 1e-12:
        return None, "leaving out any one episode gives the same kappa: no spread to estimate an interval from"
    return (_rounded(max(-1.0, kappa - z * se), 3), _rounded(min(1.0, kappa + z * se), 3)), ""


def wilson_interval(successes: int, n: int, *, population: int | None = None, z: float = Z95) -> tuple | None:
    """The Wilson score interval of successes/n, or None for n = 0.

    With `population` (the stratum's size N) the sample is treated as drawn without replacement: the effective
    sample size grows by (N - 1) / (N - n), and labelling the whole stratum leaves no uncertainty.
    """
    if n <= 0:
        return None
    p = successes / n
    if population is not None and n >= population:
        return (round(p, 4), round(p, 4))
    if population is not None and population > 1:
        n = n * (population - 1) / (population - n)
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def half_width(interval: tuple | None) -> float | None:
    return None if interval is None else (interval[1] - interval[0]) / 2


def confusion_summary(c: Confusion) -> dict:
    """The reference's figures followed by F1, kappa and the 95% Wilson intervals of precision and recall."""
    out = reference_figures(c)
    out["f1"] = f1_score(c)
    out["kappa"] = cohen_kappa(c)
    out["precision_ci"] = wilson_interval(c.tp, c.tp + c.fp)
    out["recall_ci"] = wilson_interval(c.tp, c.tp + c.fn)
    return out


# ── estimates from a labelled sample ─────────────────────────────────────────


@dataclass(frozen=True)
class Stratum:
    """One judge verdict's episodes: `population` judged so in the run, `labelled` of them in the sample, and how
    many of those the humans called successful."""

    population: int
    labelled: int
    true_successes: int

    @property
    def rate(self) -> float | None:
        return self.true_successes / self.labelled if self.labelled else None


def labels_needed(*, stratum: Stratum, target_half_width: float = 0.03, assumed_rate: float | None = None) -> int:
    """How many more labels in the stratum bring its 95% interval to ±target (the current rate assumed to hold;
    with no labels yet, the worst case 0.5). The whole stratum labelled is always enough."""
    if not stratum.population:
        return 0
    p = stratum.rate if assumed_rate is None else assumed_rate
    p = 0.5 if p is None else p
    low, high = max(stratum.labelled, 1), max(stratum.population, 1)

    def width_at(n: int) -> float:
        return half_width(wilson_interval(round(p * n), n, population=stratum.population)) or 0.0

    if stratum.labelled and width_at(stratum.labelled) <= target_half_width:
        return 0
    while low < high:  # half-width shrinks as n grows: the smallest n that meets the target
        mid = (low + high) // 2
        if width_at(mid) <= target_half_width:
            high = mid
        else:
            low = mid + 1
    return max(0, low - stratum.labelled)


def _stratum_variance(s: Stratum) -> float:
    """Variance of a stratum's sample proportion, without replacement."""
    if not s.labelled or s.rate is None:
        return 0.0
    fpc = (s.population - s.labelled) / (s.population - 1) if s.population > 1 else 0.0
    return s.rate * (1 - s.rate) / s.labelled * max(0.0, fpc)


def success_rate_estimate(judged_success: Stratum, judged_failure: Stratum, z: float = Z95) -> dict | None:
    """The run's true success rate, post-stratified by judge verdict: sum of W_h * p_h, with a normal interval."""
    strata = [s for s in (judged_success, judged_failure) if s.population]
    total = sum(s.population for s in strata)
    if not total or any(s.rate is None for s in strata):
        return None
    estimate = sum(s.population / total * s.rate for s in strata)
    se = math.sqrt(sum((s.population / total) ** 2 * _stratum_variance(s) for s in strata))
    return {"estimate": round(estimate, 4), "ci": (round(max(0.0, estimate - z * se), 4),
                                                   round(min(1.0, estimate + z * se), 4))}


def recall_estimate(judged_success: Stratum, judged_failure: Stratum) -> dict | None:
    """Estimated recall, N_S p_S / (N_S p_S + N_F p_F), with a conservative interval from the strata's bounds."""
    ps = wilson_interval(judged_success.true_successes, judged_success.labelled, population=judged_success.population)
    pf = wilson_interval(judged_failure.true_successes, judged_failure.labelled, population=judged_failure.population)
    if ps is None or (pf is None and judged_failure.population):
        return None
    pf = pf or (0.0, 0.0)

    def recall(p_s: float, p_f: float) -> float:
        found, missed = judged_success.population * p_s, judged_failure.population * p_f
        return found / (found + missed) if found + missed else 0.0

    point = recall(judged_success.rate or 0.0, judged_failure.rate or 0.0)
    return {"estimate": round(point, 4), "ci": (round(recall(ps[0], pf[1]), 4), round(recall(ps[1], pf[0]), 4))}


def sample_estimate(judged_success: Stratum, judged_failure: Stratum, *, target_half_width: float = 0.03) -> dict:
    """Everything the sample says about the whole run: the precision of its judged successes (±, and labels still
    needed for ±target), the share of true successes among its judged failures, the success rate and recall."""
    precision_ci = wilson_interval(judged_success.true_successes, judged_success.labelled,
                                   population=judged_success.population)
    missed_ci = wilson_interval(judged_failure.true_successes, judged_failure.labelled,
                                population=judged_failure.population)
    rate = judged_success.rate
    more = labels_needed(stratum=judged_success, target_half_width=target_half_width)
    everyone = judged_success.population + judged_failure.population
    return {
        "judged_success": vars(judged_success),
        "judged_failure": vars(judged_failure),
        "precision": None if rate is None else round(rate, 4),
        "precision_ci": precision_ci,
        "precision_half_width": None if precision_ci is None else round(half_width(precision_ci), 4),
        "target_half_width": target_half_width,
        "more_labels_needed": more,  # labels of judged successes; a sample over all episodes needs more in all:
        "more_random_labels_needed": math.ceil(more * everyone / judged_success.population) if more else 0,
        "missed_success_rate": None if judged_failure.rate is None else round(judged_failure.rate, 4),
        "missed_success_ci": missed_ci,
        "success_rate": success_rate_estimate(judged_success, judged_failure),
        "recall": recall_estimate(judged_success, judged_failure),
    }
