"""The certify design: which episodes a certificate is about (population and frame), their strata, the random order
each stratum is labelled in, and which labels that order lets the estimate use.

- Population: exactly the episodes an export with the same parameters writes (`export_select`).
- Frame: the episodes the same export would write if no human had labelled anything. Labels move episodes in and
  out of the population (a Not success leaves it), and an order read over a set that labels change would no longer
  be random, so the strata and their orders are the frame's; the population is the frame less what labels took out,
  plus what they let in (a human success beside the judge, a step budget freed), counted exactly in the bound.
- Strata: each episode in the first risk it holds (taskgen/triage/risk.py), else "rest".
- Order: a keyed hash of (seed, episode id) (splitmix64), the seed drawn once per run and judge config
  (review.models.CertifyDesign): any subset is in a uniformly random order, so a stratum's first n episodes are a
  simple random sample of it, whichever cut or budget decided its members.
- Labels used: those the design's walk has reached (bound.design_walk: the strata served in turn by the allocation,
  each in its order, up to the first episode without a label); labels further on were not drawn by the design (the
  false-positive audit serves the riskiest first) and wait until the walk reaches them.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np
from django.db import IntegrityError, transaction

from taskgen.id_arrays import among, id_array
from taskgen.models import CertifyDesign, Episode, FinalLabel, JudgeConfig, Judgment, LabelVerdict, Run
from taskgen.stages.certify.bound import StratumCount, design_walk
from taskgen.stages.export.order import SelectContext, read_risk_sets
from taskgen.stages.export.select import Selection, export_select
from taskgen.stages.validate.summary import summary_and_risks_refresh, summary_available
from taskgen.triage.risk import STRATA, risk_id_arrays, risk_stratum
from taskgen.triage.risks_kept import kept_risk_arrays

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
MANY = 10_000  # episodes of one run whose final labels are read as the run's, not listed one by one


def design_seed(*, run: Run, judge_config: JudgeConfig, user=None) -> int:
    """The run and config's design seed, drawn at random the first time it is asked for and kept."""
    found = CertifyDesign.objects.filter(run=run, judge_config=judge_config).values_list("seed", flat=True).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            CertifyDesign.objects.create(run=run, judge_config=judge_config, seed=secrets.randbits(62),
                                         created_by=user if getattr(user, "pk", None) else None)
    except IntegrityError:
        pass  # drawn by someone else at the same moment: theirs is the one
    return CertifyDesign.objects.get(run=run, judge_config=judge_config).seed


def order_keys(seed: int, ids: list[int]) -> np.ndarray:
    """splitmix64 of seed + id * golden ratio: a well-mixed 64-bit key per episode, the same for it in any set."""
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) + np.asarray(ids, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return z ^ (z >> np.uint64(31))


def in_design_order(seed: int, ids: list[int]) -> list[int]:
    if not len(ids):
        return []
    keys = order_keys(seed, ids)
    return [int(ids[i]) for i in np.argsort(keys, kind="stable")]


def _truth(verdict: str, adjudicated: bool) -> bool | None:
    """What a final label says of the truth: success, not (Not success, or an adjudicated Unsure: no success can
    be claimed for it), or None while reviewers' Unsure waits for an adjudicator."""
    if verdict == LabelVerdict.SUCCESS:
        return True
    if verdict == LabelVerdict.NOT_SUCCESS or adjudicated:
        return False
    return None


def label_truths(episode_ids, *, min_reviewer_accuracy: float | None = None, run: Run | None = None
                 ) -> dict[int, tuple[bool | None, str]]:
    """Each labelled episode's truth and final verdict, from its final label; with `min_reviewer_accuracy`, from the
    final-label rule over the labels of reviewers at or above that accuracy on known-truth checks only
    (taskgen/labels/quality.py): an episode only they labelled is unlabelled again, and served again."""
    if min_reviewer_accuracy is not None:
        from taskgen.labels.quality import final_verdicts_trusted
        trusted = final_verdicts_trusted(episode_ids=sorted(int(pk) for pk in episode_ids),
                                         accuracy=min_reviewer_accuracy)
        return {pk: (_truth(verdict, verdict != LabelVerdict.UNSURE), verdict) for pk, verdict in trusted.items()
                if verdict is not None}
    rows = FinalLabel.objects.filter(among(FinalLabel, episode_ids, "episode_id")) \
        if run is None or len(episode_ids) < MANY else \
        FinalLabel.objects.filter(episode__run=run)  # the run's labels, not an IN list of half a million ids
    rows = list(rows.values_list("episode_id", "verdict", "adjudicated"))
    wanted = np.isin(np.fromiter((pk for pk, _, _ in rows), dtype=np.int64, count=len(rows)),
                     np.asarray(episode_ids, dtype=np.int64))
    return {pk: (_truth(verdict, adjudicated), verdict)
            for (pk, verdict, adjudicated), keep in zip(rows, wanted.tolist(), strict=True) if keep}


@dataclass
class Stratum:
    """One stratum of the frame: its episodes in the design's order, and the count its labelled prefix gives."""

    name: str
    order: np.ndarray  # episode ids (int64)
    count: StratumCount
    beyond: int = 0  # labelled episodes after the prefix: not drawn by the design, not used (yet)

    @property
    def inclusion_probability(self) -> float:
        return self.count.labelled / self.count.size if self.count.size else 0.0


@dataclass
class Design:
    """A certificate's population, frame, strata and labels, ready for the statistics."""

    selection: Selection
    seed: int
    population: np.ndarray  # episode ids (int64), sorted
    frame: np.ndarray  # episode ids (int64), sorted
    strata: list[Stratum]
    truths: dict[int, tuple[bool | None, str]]
    sets: dict = field(default_factory=dict)  # each risk's episodes: sets, or id arrays over a whole run

    def counts(self) -> list[StratumCount]:
        return [s.count for s in self.strata]

    def stratum_of(self, episode_id: int) -> str:
        return risk_stratum(episode_id, self.sets)


def design_build(*, selection: Selection, seed: int, context: SelectContext | None = None,
                 min_reviewer_accuracy: float | None = None) -> Design:
    """The design for the exact episodes `selection` writes (its run, source, judge config, budget and cuts)."""
    frame_selection = export_select(run=selection.run, source="judge", judge_config=selection.judge_config,
                                    budget=selection.budget, exclude_risk=selection.exclude_risk, labels_ignored=True,
                                    include_verifier_failed=selection.include_verifier_failed, stop_at_budget=True,
                                    context=context)
    population = np.sort(np.fromiter((c.episode_id for c in selection.picked), dtype=np.int64))  # each once
    frame = np.sort(np.fromiter((c.episode_id for c in frame_selection.picked), dtype=np.int64))
    everyone = np.union1d(population, frame)
    sets = read_risk_sets(everyone.tolist(), run=selection.run, judge_config=selection.judge_config, context=context)
    return _design(selection=selection, seed=seed, population=population, frame=frame, everyone=everyone, sets=sets,
                   min_reviewer_accuracy=min_reviewer_accuracy)


def judged_design(*, run: Run, judge_config: JudgeConfig, seed: int) -> Design:
    """The design over every episode of the run the config judged a success (what validate measures: no export
    rule leaves any out), in the same strata and the same order as the Certify queue's."""
    selection = Selection(run=run, source="judge", judge_config=judge_config, budget=0)
    judged, sets = _judged_successes(run, judge_config)
    judged = np.sort(judged)  # one kept row an episode and config: each once
    return _design(selection=selection, seed=seed, population=judged, frame=judged, everyone=judged,
                   sets=sets if len(judged) else {})


def _judged_successes(run: Run, judge_config: JudgeConfig) -> tuple:
    """The run's episodes the config judged a success and the ones of them holding each risk, as id arrays: kept
    beside validate's summary where it is kept (one index scan), else read a query per risk."""
    if summary_available():
        summary_and_risks_refresh()
        return kept_risk_arrays(run.pk, judge_config.pk, Judgment.Verdict.SUCCESS)
    successes = Judgment.objects.filter(episode__run=run, config=judge_config, verdict=Judgment.Verdict.SUCCESS)
    # the risks read over the run's judged successes as a subquery, not as a list of their ids (half a million)
    return id_array(successes, "episode_id"), risk_id_arrays(
        Episode.objects.filter(pk__in=successes.values("episode_id")), judge_config.pk)


def _design(*, selection: Selection, seed: int, population: np.ndarray, frame: np.ndarray, everyone: np.ndarray,
            sets: dict, min_reviewer_accuracy: float | None = None) -> Design:
    """The design over sorted id arrays (half a million ids over a whole run: numpy's 4 MB, not a Python list and
    set of 50 MB); `everyone` is population and frame together, `sets` the risks they hold."""
    truths = label_truths(everyone, min_reviewer_accuracy=min_reviewer_accuracy, run=selection.run)
    orders = strata_orders(seed, frame, sets)
    seen = [_TruthsInOrder(order, truths) for order in orders]
    counts, _ = design_walk(seen)
    labelled = np.fromiter((pk for pk, (truth, _) in truths.items() if truth is not None), dtype=np.int64)
    strata = [Stratum(name, order, count, int(np.isin(order[count.labelled:], labelled).sum()))
              for name, order, count in zip(STRATA, orders, counts, strict=True)]
    return Design(selection=selection, seed=seed, population=population, frame=frame, strata=strata, truths=truths,
                  sets=sets)


def strata_orders(seed: int, frame, sets: dict[str, set[int]]) -> list[np.ndarray]:
    """Each stratum's episodes of the frame (the first risk each holds, else "rest"), in the design's order."""
    ids = np.asarray(frame, dtype=np.int64)
    unplaced = np.ones(len(ids), dtype=bool)
    orders = []
    for name in STRATA:
        if name == "rest":
            members = unplaced.copy()
        else:
            held = sets.get(name, ())
            held = held if isinstance(held, np.ndarray) else np.fromiter(held, dtype=np.int64, count=len(held))
            members = unplaced & np.isin(ids, held)
        unplaced &= ~members
        chosen = ids[members]
        orders.append(chosen[np.argsort(order_keys(seed, chosen), kind="stable")] if len(chosen) else chosen)
    return orders


class _TruthsInOrder:
    """A stratum's truths in the design's order, read as the walk asks for them (it stops at the first episode
    without a label: a few of half a million)."""

    def __init__(self, order: np.ndarray, truths: dict[int, tuple[bool | None, str]]) -> None:
        self.order, self.truths = order, truths

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, position: int) -> bool | None:
        return self.truths.get(int(self.order[position]), (None, ""))[0]
