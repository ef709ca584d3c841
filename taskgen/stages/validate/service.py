"""Validate: how good a judge config is against a ground truth (verifier results, final human labels, or one
reviewer's labels), computed in SQL so the page and the command cost a fixed number of queries at any run size.

The reference's figures come out exactly as its `validate` prints them: only episodes with both a truth and a verdict
count; episodes that could not be judged (no judgment, or no verdict) are counted and left out, never a reason to
stop. The page (`review.views.validate`) and `manage.py taskgen validate` both call `validate_compute`.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import combinations

from django.db.models import Count, F, FilteredRelation, OuterRef, Q, QuerySet, Subquery, Sum
from django.urls import reverse

from review.models import Label, LabelVerdict
from taskgen.models import Episode, JudgeConfig, Judgment, Run
from taskgen.stats import (
    REFERENCE_KEYS,
    Confusion,
    Stratum,
    cohen_kappa,
    confusion_summary,
    pooled_agreement,
    sample_estimate,
)

AGAINST_CHOICES = {
    "verifier": "verifier results",
    "human": "final human labels",
    "reviewer": "one reviewer's labels",
}
LIST_LIMIT = 100  # false positives/negatives shown on the page; the downloads hold them all
SUCCESS, NOT_SUCCESS, NO_VERDICT = (Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS, Judgment.Verdict.NONE)


class ValidateError(ValueError):
    """A validate request that cannot be answered (unknown truth source, reviewer missing); the message says why."""


@dataclass
class ValidateReport:
    """One judge config against one ground truth over some runs: overall, per site, per task kind, and the lists."""

    runs: list[str]
    config: str
    against: str
    reviewer: str | None
    confusion: Confusion
    figures: dict
    per_site: list[dict]
    per_kind: list[dict]
    episodes_in_runs: int
    with_truth: int
    unjudged: int  # a truth but no usable verdict: left out of the figures
    unjudged_no_verdict: int  # of those, judged but the answer had no verdict ("NONE")
    judged_without_truth: int
    judgments: int
    cost_usd: float
    false_positives: list[dict] = field(default_factory=list)
    false_negatives: list[dict] = field(default_factory=list)
    sample: dict = field(default_factory=dict)  # the whole runs' precision estimated from the final labels

    @property
    def reference_line(self) -> dict:
        """The reference's JSON line: its keys, in its order."""
        return {key: self.figures[key] for key in REFERENCE_KEYS}

    @property
    def cost_per_1000(self) -> float | None:
        return round(self.cost_usd / self.judgments * 1000, 4) if self.judgments else None

    def as_dict(self) -> dict:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "confusion"}
        data["cost_per_1000_episodes"] = self.cost_per_1000
        return data


def _truth(against: str, reviewer) -> tuple[dict, Q, Q]:
    """Annotations and the (truly successful, truly not) conditions for a truth source; UNSURE counts as neither."""
    if against == "verifier":
        return {}, Q(verifier_result__ok=True), Q(verifier_result__ok=False)
    if against == "human":
        return {}, Q(final_label__verdict=LabelVerdict.SUCCESS), Q(final_label__verdict=LabelVerdict.NOT_SUCCESS)
    if against == "reviewer":
        if reviewer is None:
            raise ValidateError("choose the reviewer whose labels are the ground truth")
        relation = FilteredRelation("labels", condition=Q(labels__reviewer=reviewer))
        return {"truth_label": relation}, Q(truth_label__verdict=LabelVerdict.SUCCESS), Q(
            truth_label__verdict=LabelVerdict.NOT_SUCCESS)
    raise ValidateError(f"unknown ground truth {against!r}: use one of {', '.join(AGAINST_CHOICES)}")


def _run_ids(runs: Iterable[Run] | QuerySet) -> list[int]:
    return [run.pk for run in runs]


def _episodes(run_ids: list[int], config: JudgeConfig, against: str, reviewer, also_judged_by) -> tuple:
    """Episodes of the runs with the config's judgment joined as `cj` and the truth source joined; the conditions."""
    annotations, truly, falsely = _truth(against, reviewer)
    base = Episode.objects.filter(run_id__in=run_ids).annotate(
        cj=FilteredRelation("judgments", condition=Q(judgments__config=config)), **annotations)
    if also_judged_by is not None:  # side by side: both configs on the same episodes
        base = base.annotate(oj=FilteredRelation("judgments", condition=Q(judgments__config=also_judged_by)))
        base = base.filter(oj__verdict__in=[SUCCESS, NOT_SUCCESS])
    return base, truly, falsely


_LABELLED = Q(final_label__verdict__in=[LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS])
_LABELLED_TRUE = Q(final_label__verdict=LabelVerdict.SUCCESS)


def _cell_counts(truly: Q, falsely: Q) -> dict:
    says_yes, says_no = Q(cj__verdict=SUCCESS), Q(cj__verdict=NOT_SUCCESS)
    has_truth = truly | falsely
    return {
        "tp": Count("id", filter=truly & says_yes), "fp": Count("id", filter=falsely & says_yes),
        "fn": Count("id", filter=truly & says_no), "tn": Count("id", filter=falsely & says_no),
        "with_truth": Count("id", filter=has_truth),
        "no_verdict": Count("id", filter=has_truth & Q(cj__verdict=NO_VERDICT)),
        "judged": Count("id", filter=says_yes | says_no), "total": Count("id"),
        "judgments": Count("cj__id"), "cost": Sum("cj__cost_usd"),
        # the labelled sample per judge verdict (final labels), so the sample estimate costs no second scan
        "n_s": Count("id", filter=says_yes), "l_s": Count("id", filter=says_yes & _LABELLED),
        "t_s": Count("id", filter=says_yes & _LABELLED_TRUE), "n_f": Count("id", filter=says_no),
        "l_f": Count("id", filter=says_no & _LABELLED), "t_f": Count("id", filter=says_no & _LABELLED_TRUE),
    }


def _grouped(rows: list[dict], key: str) -> list[dict]:
    """Per-group figures from the (site, kind) rows: summed in Python over groups, never over episodes."""
    groups: dict[str, Confusion] = {}
    for row in rows:
        cell = Confusion(row["tp"], row["fp"], row["fn"], row["tn"])
        groups[row[key]] = groups.get(row[key], Confusion()) + cell
    return [{"name": name, **confusion_summary(c)} for name, c in sorted(groups.items()) if c.n]


def _episode_list(queryset: QuerySet, condition: Q, limit: int | None) -> list[dict]:
    rows = queryset.filter(condition).values("id", "task__task_id", "task__instruction", "site__slug", "run__name")
    rows = rows.order_by("run_id", "task_order", "id")
    rows = rows[:limit] if limit is not None else rows
    # Episode.get_absolute_url's URL, reversed without building a model instance per row
    return [{"episode_id": r["id"], "task_id": r["task__task_id"], "site": r["site__slug"], "run": r["run__name"],
             "instruction": r["task__instruction"], "url": reverse("review:episode_detail", args=[r["id"]])}
            for r in rows]


def validate_compute(*, runs: Iterable[Run], config: JudgeConfig, against: str = "verifier", reviewer=None,
                     also_judged_by: JudgeConfig | None = None, list_limit: int | None = LIST_LIMIT) -> ValidateReport:
    """The judge config's figures against the truth over the runs: 1 grouped aggregate query and 2 list queries."""
    run_list = list(runs)
    base, truly, falsely = _episodes(_run_ids(run_list), config, against, reviewer, also_judged_by)
    rows = list(base.values("site__slug", "task_kind").annotate(**_cell_counts(truly, falsely)).order_by())
    overall = sum((Confusion(r["tp"], r["fp"], r["fn"], r["tn"]) for r in rows), Confusion())
    total = {key: sum(r[key] or 0 for r in rows) for key in ("with_truth", "no_verdict", "judged", "total",
                                                               "judgments", "cost", *_STRATA_KEYS)}
    says_yes = Q(cj__verdict=SUCCESS)
    return ValidateReport(
        runs=[run.name for run in run_list], config=config.key, against=against,
        reviewer=getattr(reviewer, "username", None), confusion=overall, figures=confusion_summary(overall),
        per_site=_grouped(rows, "site__slug"), per_kind=_grouped(rows, "task_kind"),
        episodes_in_runs=total["total"], with_truth=total["with_truth"], unjudged=total["with_truth"] - overall.n,
        unjudged_no_verdict=total["no_verdict"], judged_without_truth=total["judged"] - overall.n,
        judgments=total["judgments"], cost_usd=float(total["cost"] or Decimal(0)),
        false_positives=_episode_list(base, falsely & says_yes, list_limit),
        false_negatives=_episode_list(base, truly & Q(cj__verdict=NOT_SUCCESS), list_limit),
        sample=_sample_from(total),
    )


_STRATA_KEYS = ("n_s", "l_s", "t_s", "n_f", "l_f", "t_f")


def _sample_from(cells: dict, target_half_width: float = 0.03) -> dict:
    return sample_estimate(Stratum(cells["n_s"], cells["l_s"], cells["t_s"]),
                           Stratum(cells["n_f"], cells["l_f"], cells["t_f"]), target_half_width=target_half_width)


def validate_false_positive_task_ids(*, runs: Iterable[Run], config: JudgeConfig, against: str = "verifier",
                                     reviewer=None) -> list[str]:
    """Every false positive's task_id, in run and task-file order: the reference's task-id lines."""
    base, _, falsely = _episodes(_run_ids(runs), config, against, reviewer, None)
    rows = base.filter(falsely & Q(cj__verdict=SUCCESS)).order_by("run_id", "task_order", "id")
    return list(rows.values_list("task__task_id", flat=True))


# ── two judge configs side by side ───────────────────────────────────────────


def judges_agreement(*, runs: Iterable[Run], config_a: JudgeConfig, config_b: JudgeConfig) -> dict:
    """How often two configs give the same verdict on the episodes both judged, and Cohen's kappa between them."""
    episodes = Episode.objects.filter(run_id__in=_run_ids(runs)).annotate(
        ja=FilteredRelation("judgments", condition=Q(judgments__config=config_a)),
        jb=FilteredRelation("judgments", condition=Q(judgments__config=config_b)))
    a_yes, a_no = Q(ja__verdict=SUCCESS), Q(ja__verdict=NOT_SUCCESS)
    b_yes, b_no = Q(jb__verdict=SUCCESS), Q(jb__verdict=NOT_SUCCESS)
    cells = episodes.aggregate(tp=Count("id", filter=a_yes & b_yes), fn=Count("id", filter=a_yes & b_no),
                               fp=Count("id", filter=a_no & b_yes), tn=Count("id", filter=a_no & b_no))
    c = Confusion(**cells)
    return {"episodes": c.n, "both_success": c.tp, "only_a": c.fn, "only_b": c.fp, "both_not": c.tn,
            "agreement": round((c.tp + c.tn) / max(1, c.n), 3), "kappa": cohen_kappa(c)}


def validate_compare(*, runs: Iterable[Run], config_a: JudgeConfig, config_b: JudgeConfig,
                     against: str = "verifier", reviewer=None, list_limit: int | None = LIST_LIMIT) -> dict:
    """Two configs on the same episodes (those both gave a verdict): each one's report, their agreement, cost."""
    run_list = list(runs)
    common = {"runs": run_list, "against": against, "reviewer": reviewer, "list_limit": list_limit}
    return {
        "a": validate_compute(config=config_a, also_judged_by=config_b, **common),
        "b": validate_compute(config=config_b, also_judged_by=config_a, **common),
        "agreement": judges_agreement(runs=run_list, config_a=config_a, config_b=config_b),
    }


# ── estimates from a labelled sample ─────────────────────────────────────────


def validate_sample_estimate(*, runs: Iterable[Run], config: JudgeConfig, sample=None,
                             target_half_width: float = 0.03) -> dict:
    """The whole run's precision estimated from a human-labelled random sample, post-stratified by judge verdict.

    `sample` is the sampled episodes (a queryset or ids); by default every episode with a final label (which
    `validate_compute` also reports as `report.sample`). UNSURE labels are left out; the estimate is only as good as
    the sample is random.
    """
    labelled, true = _LABELLED, _LABELLED_TRUE
    if sample is not None:
        labelled, true = labelled & Q(id__in=sample), true & Q(id__in=sample)
    yes, no = Q(cj__verdict=SUCCESS), Q(cj__verdict=NOT_SUCCESS)
    episodes = Episode.objects.filter(run_id__in=_run_ids(runs)).annotate(
        cj=FilteredRelation("judgments", condition=Q(judgments__config=config)))
    cells = episodes.aggregate(
        n_s=Count("id", filter=yes), l_s=Count("id", filter=yes & labelled), t_s=Count("id", filter=yes & true),
        n_f=Count("id", filter=no), l_f=Count("id", filter=no & labelled), t_f=Count("id", filter=no & true))
    return _sample_from(cells, target_half_width)


# ── agreement between humans ─────────────────────────────────────────────────

_DECIDED = [LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS]


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


def label_pairs(*, runs: Iterable[Run]) -> list[tuple[str, str]]:
    """Every pair of labels two reviewers gave the same episode of the runs, as (earlier label, later label)."""
    by_episode: dict[int, list[str]] = defaultdict(list)
    labels = (Label.objects.filter(episode__run_id__in=_run_ids(runs)).order_by("episode_id", "created_at", "id")
              .values_list("episode_id", "verdict"))
    for episode_id, verdict in labels:
        by_episode[episode_id].append(verdict)
    return [pair for verdicts in by_episode.values() for pair in combinations(verdicts, 2)]


def human_agreement(*, runs: Iterable[Run]) -> dict:
    """The pooled agreement between humans over every episode labelled twice (or more): with UNSURE as a third
    category, and without it (only pairs where both said SUCCESS or NOT SUCCESS). Needs no judge."""
    pairs = label_pairs(runs=runs)
    decided = [(a, b) for a, b in pairs if a in _DECIDED and b in _DECIDED]
    return {"with_unsure": pooled_agreement(pairs), "without_unsure": pooled_agreement(decided)}


def judge_reviewer_agreement(*, runs: Iterable[Run], config: JudgeConfig) -> list[dict]:
    """The judge config against each reviewer, on the episodes the reviewer decided and the judge gave a verdict."""
    # Looked up per label through the (episode, config) unique index: labels are few, judgments many.
    verdict = Judgment.objects.filter(episode=OuterRef("episode_id"), config=config).values("verdict")[:1]
    rows = (Label.objects.filter(episode__run_id__in=_run_ids(runs), verdict__in=_DECIDED)
            .annotate(judge=Subquery(verdict))
            .values("reviewer__username")
            .annotate(tp=Count("id", filter=Q(verdict=LabelVerdict.SUCCESS, judge=SUCCESS)),
                      fp=Count("id", filter=Q(verdict=LabelVerdict.NOT_SUCCESS, judge=SUCCESS)),
                      fn=Count("id", filter=Q(verdict=LabelVerdict.SUCCESS, judge=NOT_SUCCESS)),
                      tn=Count("id", filter=Q(verdict=LabelVerdict.NOT_SUCCESS, judge=NOT_SUCCESS)))
            .order_by("reviewer__username"))
    found = [{"reviewer": r["reviewer__username"], **_pair_summary(Confusion(r["tp"], r["fp"], r["fn"], r["tn"]))}
             for r in rows]
    return [row for row in found if row["episodes"]]


def default_config(*, runs: Iterable[Run]) -> JudgeConfig | None:
    """The config with the most judgments on the runs (ties: the lowest id), or None when nothing is judged."""
    return (JudgeConfig.objects.filter(judgments__episode__run_id__in=_run_ids(runs))
            .annotate(n=Count("judgments")).order_by("-n", "id").first())

