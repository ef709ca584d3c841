"""A labelling simulated on a population whose truth is known: the coverage test and bench/certify.py both run it.

Each stratum is a shuffled list of true/false episodes (the design's random order); a reviewer labels the episode
the design asks for next, a label is the truth, and the certificate is looked at as often as the researcher likes
(every `look_every` labels), stopping once it says "certified" when `stop_when_certified`.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from taskgen.stages.certify.bound import StratumCount, allocate_next, successes_lower

Bound = Callable[[list[StratumCount], float], int]


def design_bound(strata: list[StratumCount], confidence: float) -> int:
    return successes_lower(strata, confidence=confidence)


@dataclass
class Walk:
    """What one simulated labelling saw: labels used, whether it certified, and whether any look's bound was above
    the truth (a miss)."""

    labels: int = 0
    certified: bool = False
    missed: bool = False
    bounds: list[int] = field(default_factory=list)


def population_draw(sizes: Sequence[int], rates: Sequence[float], rng: random.Random) -> list[list[bool]]:
    """Strata of the given sizes with exactly round(rate * size) true successes each, each in a random order."""
    strata = []
    for size, rate in zip(sizes, rates, strict=True):
        truths = [i < round(rate * size) for i in range(size)]
        rng.shuffle(truths)
        strata.append(truths)
    return strata


def labelling_walk(population: list[list[bool]], *, target: float, confidence: float = 0.95,
                   look_every: int = 1, max_labels: int | None = None, stop_when_certified: bool = True,
                   bound: Bound = design_bound, drop_rejected: bool = True) -> Walk:
    """Label in the design's order, look at the bound every `look_every` labels; the population's precision is its
    true successes over the episodes not rejected so far (a label NOT SUCCESS takes an episode out, as the export
    does), or over all of them when `drop_rejected` is false."""
    truth = sum(sum(stratum) for stratum in population)
    counts = [StratumCount(len(s), 0, 0) for s in population]
    total = sum(len(s) for s in population)
    walk = Walk()
    limit = total if max_labels is None else min(total, max_labels)
    while walk.labels < limit:
        (h,) = allocate_next(counts, count=1)
        seen = population[h][counts[h].labelled]
        counts[h] = counts[h].labelled_with(seen)
        walk.labels += 1
        if walk.labels % look_every and walk.labels < limit:
            continue
        lower = bound(counts, confidence)
        walk.bounds.append(lower)
        walk.missed |= lower > truth
        kept = total - sum(c.labelled - c.successes for c in counts) if drop_rejected else total
        if lower >= target * kept:
            walk.certified = True
            if stop_when_certified:
                break
    return walk
