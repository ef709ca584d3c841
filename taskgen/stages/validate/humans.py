"""Agreement with humans: between reviewers (pooled over every episode labelled twice, and per pair of reviewers)
and between the judge and each reviewer. The agreement between humans needs no judge: the validate page, its JSON
and CSV downloads and `taskgen validate` give it for a run nobody has judged (`validate_humans`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations

from django.db.models import Count, F, FilteredRelation, Q

from taskgen.models import JudgeConfig, Judgment, Label, LabelVerdict, Run
from taskgen.stats import Confusion, cohen_kappa, pooled_agreement

SUCCESS = Judgment.Verdict.SUCCESS
_VERDICTS = (Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS)
_DECIDED = [LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS]


def _run_ids(runs: Iterable[Run]) -> list[int]:
    return [run.pk for run in runs]


def _pair_summary(c: Confusion) -> dict:
    return {"episodes": c.n, "agree": c.tp + c.tn, "agreement": round((c.tp + c.tn) / max(1, c.n), 3),
            "kappa": cohen_kappa(c), "cells": [c.tp, c.fp, c.fn, c.tn]}


def reviewer_agreement(*, runs: Iterable[Run]) -> list[dict]:
    """Cohen's kappa for each pair of reviewers on the episodes both labelled SUCCESS or NOT SUCCESS."""
    pairs = (Label.objects.filter(episode__run_id__in=_run_ids(runs), verdict__in=_DECIDED,
                                  episode__labels__verdict__in=_DECIDED,
                                  episode__labels__reviewer_id__gt=F("reviewer_id"))
             .values("reviewer__username", "episode__labels__reviewer__username")
             .annotate(tp=Count("id", filter=Q(verdict=LabelVerdict.SUCCESS,
                                               episode__labels__verdict=LabelVerdict.SUCCESS)),
                       fp=Count("id", filter=Q(verdict=LabelVerdict.NOT_SUCCESS,
                                               episode__labels__verdict=LabelVerdict.SUCCESS)),
                       fn=Count("id", filter=Q(verdict=LabelVerdict.SUCCESS,
                                               episode__labels__verdict=LabelVerdict.NOT_SUCCESS)),
                       tn=Count("id", filter=Q(verdict=LabelVerdict.NOT_SUCCESS,
                                               episode__labels__verdict=LabelVerdict.NOT_SUCCESS)))
             .order_by("reviewer__username", "episode__labels__reviewer__username"))
    return [{"a": r["reviewer__username"], "b": r["episode__labels__reviewer__username"],
             **_pair_summary(Confusion(r["tp"], r["fp"], r["fn"], r["tn"]))} for r in pairs]


def label_pairs(*, runs: Iterable[Run]) -> list[tuple[int, str, str]]:
    """Every pair of labels two reviewers gave the same episode of the runs: (episode id, one label, the other)."""
    by_episode: dict[int, list[str]] = defaultdict(list)
    labels = (Label.objects.filter(episode__run_id__in=_run_ids(runs)).order_by("episode_id", "created_at", "id")
              .values_list("episode_id", "verdict"))
    for episode_id, verdict in labels:
        by_episode[episode_id].append(verdict)
    return [(episode_id, *pair) for episode_id, verdicts in by_episode.items() for pair in combinations(verdicts, 2)]


def _pooled(triples: list[tuple[int, str, str]]) -> dict:
    return pooled_agreement([(a, b) for _, a, b in triples], units=[episode for episode, _, _ in triples])


def human_agreement(*, runs: Iterable[Run]) -> dict:
    """The pooled agreement between humans over every episode labelled twice (or more): with UNSURE as a third
    category, and without it (only pairs where both said SUCCESS or NOT SUCCESS). Needs no judge; order-free
    (Fleiss' kappa: `taskgen.stats.pooled_agreement`)."""
    triples = label_pairs(runs=runs)
    decided = [(e, a, b) for e, a, b in triples if a in _DECIDED and b in _DECIDED]
    return {"with_unsure": _pooled(triples), "without_unsure": _pooled(decided)}


def judge_reviewer_agreement(*, runs: Iterable[Run], config: JudgeConfig) -> list[dict]:
    """The judge config against each reviewer, on the episodes the reviewer decided and the judge gave a verdict."""
    judged = FilteredRelation("episode__judgments", condition=Q(episode__judgments__config=config))
    rows = (Label.objects.filter(episode__run_id__in=_run_ids(runs), verdict__in=_DECIDED)
            .annotate(judged=judged).filter(judged__verdict__in=_VERDICTS)
            .values("reviewer__username", "verdict", "judged__verdict").annotate(n=Count("id")).order_by())
    cells: dict[str, Confusion] = defaultdict(Confusion)
    for row in rows:  # grouped per (reviewer, label, verdict): the judge's verdict is read once per label
        human, judge, n = row["verdict"] == LabelVerdict.SUCCESS, row["judged__verdict"] == SUCCESS, row["n"]
        cells[row["reviewer__username"]] += Confusion(tp=n * (human and judge), fp=n * (not human and judge),
                                                      fn=n * (human and not judge), tn=n * (not human and not judge))
    return [{"reviewer": name, **_pair_summary(c)} for name, c in sorted(cells.items()) if c.n]


def validate_humans(*, runs: Iterable[Run], config: JudgeConfig | None = None) -> dict:
    """What validate says of humans on these runs: the pooled agreement between them, each pair of reviewers, and,
    when a judge config is given, the judge against each reviewer (an empty list without one)."""
    runs = list(runs)
    return {"reviewer_agreement": reviewer_agreement(runs=runs), "human_agreement": human_agreement(runs=runs),
            "judge_vs_reviewers": judge_reviewer_agreement(runs=runs, config=config) if config else []}
