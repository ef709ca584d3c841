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

from django.db.models import Count, FilteredRelation, Q, QuerySet, Sum
from django.urls import reverse

from taskgen.models import Episode, JudgeConfig, Judgment, LabelVerdict, Run, Site, VerifierResult
from taskgen.stages.validate.summary import summary_available, summary_cells
from taskgen.stats import (
    REFERENCE_KEYS,
    Confusion,
    Stratum,
    cohen_kappa,
    confusion_summary,
    sample_estimate,
)

AGAINST_CHOICES = {
    "verifier": "verifier results",
    "human": "final human labels",
    "reviewer": "one reviewer's labels",
}
LIST_LIMIT = 100  # false positives/negatives shown on the page; the downloads hold them all
SUCCESS, NOT_SUCCESS, NO_VERDICT = (Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS, Judgment.Verdict.NONE)
_VERDICTS = (SUCCESS, NOT_SUCCESS)
_DECIDED = [LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS]
_LABELLED = Q(final_label__verdict__in=_DECIDED)
_LABELLED_TRUE = Q(final_label__verdict=LabelVerdict.SUCCESS)


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


def _truth(against: str, reviewer) -> tuple[dict, str]:
    """Annotations and the field that holds an episode's truth for a truth source (a verifier's ok, or a label's
    verdict); `_truth_of` reads its value."""
    if against == "verifier":
        return {}, "verifier_result__ok"
    if against == "human":
        return {}, "final_label__verdict"
    if against == "reviewer":
        if reviewer is None:
            raise ValidateError("choose the reviewer whose labels are the ground truth")
        return {"truth_label": FilteredRelation("labels", condition=Q(labels__reviewer=reviewer))}, \
            "truth_label__verdict"
    raise ValidateError(f"unknown ground truth {against!r}: use one of {', '.join(AGAINST_CHOICES)}")


def _truth_of(value) -> bool | None:
    """True when the episode truly succeeded, False when it truly did not, None without a truth (UNSURE too)."""
    if value is True or value == LabelVerdict.SUCCESS:
        return True
    if value is False or value == LabelVerdict.NOT_SUCCESS:
        return False
    return None


def _truth_conditions(against: str, reviewer) -> tuple[dict, Q, Q]:
    """Annotations and the (truly successful, truly not) conditions, for the episode lists."""
    annotations, truth = _truth(against, reviewer)
    if against == "verifier":
        return annotations, Q(**{truth: True}), Q(**{truth: False})
    return annotations, Q(**{truth: LabelVerdict.SUCCESS}), Q(**{truth: LabelVerdict.NOT_SUCCESS})


def _run_ids(runs: Iterable[Run] | QuerySet) -> list[int]:
    return [run.pk for run in runs]


def _judged_by(episodes: QuerySet, name: str, config: JudgeConfig) -> QuerySet:
    return episodes.annotate(**{name: FilteredRelation("judgments", condition=Q(judgments__config=config))})


def _cells(run_ids: list[int], config: JudgeConfig, against: str, reviewer, other: JudgeConfig | None) -> list[dict]:
    """The runs' episodes counted per (site, kind, verdict, truth, final label[, the other config's verdict]): a few
    hundred rows whatever the run size, from the summary where it is kept (summary.py), else one grouped scan; every
    figure is summed from them in Python."""
    if against in ("verifier", "human") and summary_available() and (other is None or other.pk != config.pk):
        rows = summary_cells(run_ids, config.pk, other.pk if other else None)
        for row in rows:
            row["truth"] = _truth_of(row["final"] if against == "human" else _VERIFIER_TRUTH[row["verifier"]])
    else:
        rows = _live_cells(run_ids, config, against, reviewer, other)
    slugs = dict(Site.objects.filter(pk__in={row["site_id"] for row in rows}).values_list("pk", "slug"))
    for row in rows:
        row["site__slug"] = slugs[row["site_id"]]
    return rows


_VERIFIER_TRUTH = {1: True, 0: False, -1: None}


def _live_cells(run_ids: list[int], config: JudgeConfig, against: str, reviewer,
                other: JudgeConfig | None) -> list[dict]:
    """`_cells` counted from the episodes themselves: one grouped scan over the runs' episodes."""
    annotations, truth = _truth(against, reviewer)
    episodes = _judged_by(Episode.objects.filter(run_id__in=run_ids), "cj", config).annotate(**annotations)
    keys = ["site_id", "task_kind", "cj__verdict", truth, "final_label__verdict"]  # slugs looked up once, in _cells
    sums = {"n": Count("id"), "cost": Sum("cj__cost_usd")}
    if other is not None:
        episodes = _judged_by(episodes, "oj", other)
        keys.append("oj__verdict")
        sums["other_cost"] = Sum("oj__cost_usd")
    rows = list(episodes.values(*dict.fromkeys(keys)).annotate(**sums).order_by())
    for row in rows:
        row["truth"], row["final"] = _truth_of(row[truth]), row["final_label__verdict"]
    return rows


@dataclass
class _Tally:
    """Sums of the cells one report reads: overall, per site and per task kind, and the labelled sample."""

    sites: dict = field(default_factory=lambda: defaultdict(Confusion))
    kinds: dict = field(default_factory=lambda: defaultdict(Confusion))
    totals: dict = field(default_factory=lambda: defaultdict(int))
    cost: Decimal = Decimal(0)

    def add(self, row: dict, verdict: str | None, cost) -> None:
        n, truth, final = row["n"], row["truth"], row["final"]
        yes, no = verdict == SUCCESS, verdict == NOT_SUCCESS
        cell = Confusion(tp=n * (truth is True and yes), fp=n * (truth is False and yes),
                         fn=n * (truth is True and no), tn=n * (truth is False and no))
        self.sites[row["site__slug"]] += cell
        self.kinds[row["task_kind"]] += cell
        labelled, labelled_true = final in _DECIDED, final == LabelVerdict.SUCCESS
        for key, counts in (("total", True), ("with_truth", truth is not None), ("judged", yes or no),
                            ("no_verdict", truth is not None and verdict == NO_VERDICT),
                            ("judgments", verdict is not None), ("n_s", yes), ("l_s", yes and labelled),
                            ("t_s", yes and labelled_true), ("n_f", no), ("l_f", no and labelled),
                            ("t_f", no and labelled_true)):
            self.totals[key] += n * counts
        self.cost += cost or Decimal(0)


def _grouped(groups: dict) -> list[dict]:
    return [{"name": name, **confusion_summary(c)} for name, c in sorted(groups.items()) if c.n]


def _report(tally: _Tally, *, runs: list[Run], config: JudgeConfig, against: str, reviewer,
            sample: dict | None = None) -> ValidateReport:
    overall, total = sum(tally.kinds.values(), Confusion()), tally.totals
    return ValidateReport(
        runs=[run.name for run in runs], config=config.key, against=against,
        reviewer=getattr(reviewer, "username", None), confusion=overall, figures=confusion_summary(overall),
        per_site=_grouped(tally.sites), per_kind=_grouped(tally.kinds),
        episodes_in_runs=total["total"], with_truth=total["with_truth"], unjudged=total["with_truth"] - overall.n,
        unjudged_no_verdict=total["no_verdict"], judged_without_truth=total["judged"] - overall.n,
        judgments=total["judgments"], cost_usd=float(tally.cost),
        sample=sample if sample is not None else validate_sample_estimate(runs=runs, config=config))


def _episode_list(queryset: QuerySet, condition: Q, limit: int | None) -> list[dict]:
    if limit == 0:
        return []
    rows = queryset.filter(condition).values("id", "task__task_id", "task__instruction", "site__slug", "run__name",
                                             "verifier_result__ok", "verifier_result__detail")
    rows = rows.order_by("run_id", "task_order", "id")
    rows = rows[:limit] if limit is not None else rows
    # Episode.get_absolute_url's URL, reversed without building a model instance per row
    return [{"episode_id": r["id"], "task_id": r["task__task_id"], "site": r["site__slug"], "run": r["run__name"],
             "instruction": r["task__instruction"], "url": reverse("review:episode_detail", args=[r["id"]]),
             "verifier": VerifierResult.reason_of(r["verifier_result__ok"], r["verifier_result__detail"])}
            for r in rows]


def _listed(run_ids: list[int], config: JudgeConfig, against: str, reviewer, also_judged_by) -> tuple:
    """The runs' episodes with the config's judgment joined as `cj` (and only those the other config also gave a
    verdict, side by side), with the truth conditions: what the false positive and negative lists read."""
    annotations, truly, falsely = _truth_conditions(against, reviewer)
    base = _judged_by(Episode.objects.filter(run_id__in=run_ids), "cj", config).annotate(**annotations)
    if also_judged_by is not None:
        base = _judged_by(base, "oj", also_judged_by).filter(oj__verdict__in=_VERDICTS)
    return base, truly, falsely


def _with_lists(report: ValidateReport, *, run_ids: list[int], config: JudgeConfig, against: str, reviewer,
                also_judged_by, list_limit: int | None) -> ValidateReport:
    base, truly, falsely = _listed(run_ids, config, against, reviewer, also_judged_by)
    report.false_positives = _episode_list(base, falsely & Q(cj__verdict=SUCCESS), list_limit)
    report.false_negatives = _episode_list(base, truly & Q(cj__verdict=NOT_SUCCESS), list_limit)
    return report


def validate_compute(*, runs: Iterable[Run], config: JudgeConfig, against: str = "verifier", reviewer=None,
                     also_judged_by: JudgeConfig | None = None, list_limit: int | None = LIST_LIMIT) -> ValidateReport:
    """The judge config's figures against the truth over the runs (side by side: only on the episodes
    `also_judged_by` gave a verdict): 1 grouped query, 1 for the site names and 2 list queries."""
    run_list = list(runs)
    run_ids = _run_ids(run_list)
    tally = _Tally()
    for row in _cells(run_ids, config, against, reviewer, also_judged_by):
        if also_judged_by is None or row["oj__verdict"] in _VERDICTS:
            tally.add(row, row["cj__verdict"], row["cost"])
    report = _report(tally, runs=run_list, config=config, against=against, reviewer=reviewer)
    return _with_lists(report, run_ids=run_ids, config=config, against=against, reviewer=reviewer,
                       also_judged_by=also_judged_by, list_limit=list_limit)


_STRATA_KEYS = ("n_s", "l_s", "t_s", "n_f", "l_f", "t_f")


def _sample_from(cells: dict, target_half_width: float = 0.03) -> dict:
    return sample_estimate(Stratum(cells["n_s"], cells["l_s"], cells["t_s"]),
                           Stratum(cells["n_f"], cells["l_f"], cells["t_f"]), target_half_width=target_half_width)


def validate_false_positive_task_ids(*, runs: Iterable[Run], config: JudgeConfig, against: str = "verifier",
                                     reviewer=None) -> list[str]:
    """Every false positive's task_id, in run and task-file order: the reference's task-id lines."""
    base, _, falsely = _listed(_run_ids(runs), config, against, reviewer, None)
    rows = base.filter(falsely & Q(cj__verdict=SUCCESS)).order_by("run_id", "task_order", "id")
    return list(rows.values_list("task__task_id", flat=True))


# ── two judge configs side by side ───────────────────────────────────────────


def _agreement(rows: list[dict]) -> dict:
    """Two configs' verdicts on the episodes both gave one: how often they agree, and Cohen's kappa."""
    c = Confusion()
    for row in rows:
        a, b, n = row["cj__verdict"], row["oj__verdict"], row["n"]
        if a in _VERDICTS and b in _VERDICTS:
            c += Confusion(tp=n * (a == b == SUCCESS), fn=n * (a == SUCCESS != b), fp=n * (b == SUCCESS != a),
                           tn=n * (a == b == NOT_SUCCESS))
    return {"episodes": c.n, "both_success": c.tp, "only_a": c.fn, "only_b": c.fp, "both_not": c.tn,
            "agreement": round((c.tp + c.tn) / max(1, c.n), 3), "kappa": cohen_kappa(c)}


def judges_agreement(*, runs: Iterable[Run], config_a: JudgeConfig, config_b: JudgeConfig) -> dict:
    """How often two configs give the same verdict on the episodes both judged, and Cohen's kappa between them."""
    return _agreement(_cells(_run_ids(runs), config_a, "verifier", None, config_b))


def validate_compare(*, runs: Iterable[Run], config_a: JudgeConfig, config_b: JudgeConfig,
                     against: str = "verifier", reviewer=None, list_limit: int | None = LIST_LIMIT,
                     alone_list_limit: int | None = LIST_LIMIT) -> dict:
    """Two configs on the same episodes (those both gave a verdict): each one's report, their agreement, and
    config_a's report over every episode (`alone`, what `validate_compute` gives), all read from one grouped query
    (and the lists, when asked for)."""
    run_list = list(runs)
    run_ids = _run_ids(run_list)
    rows = _cells(run_ids, config_a, against, reviewer, config_b)
    tally_a, tally_b, alone = _Tally(), _Tally(), _Tally()
    for row in rows:  # each config's report covers the episodes the other one gave a verdict
        alone.add(row, row["cj__verdict"], row["cost"])
        if row["oj__verdict"] in _VERDICTS:
            tally_a.add(row, row["cj__verdict"], row["cost"])
        if row["cj__verdict"] in _VERDICTS:
            tally_b.add(row, row["oj__verdict"], row["other_cost"])
    common = {"runs": run_list, "against": against, "reviewer": reviewer}
    lists = {"run_ids": run_ids, "against": against, "reviewer": reviewer}
    sample_a = validate_sample_estimate(runs=run_list, config=config_a)  # once: the design reads every judged success
    return {
        "a": _with_lists(_report(tally_a, config=config_a, sample=sample_a, **common), config=config_a,
                         also_judged_by=config_b, list_limit=list_limit, **lists),
        "b": _with_lists(_report(tally_b, config=config_b, **common), config=config_b, also_judged_by=config_a,
                         list_limit=list_limit, **lists),
        "agreement": _agreement(rows),
        "alone": _with_lists(_report(alone, config=config_a, sample=sample_a, **common), config=config_a,
                             also_judged_by=None,
                             list_limit=alone_list_limit, **lists),
    }


# ── estimates from a labelled sample ─────────────────────────────────────────


def validate_sample_estimate(*, runs: Iterable[Run], config: JudgeConfig, sample=None,
                             target_half_width: float = 0.03) -> dict:
    """The whole run's precision estimated from human labels, counting a label only with the probability a random
    design gave it (issue 22: the false-positive audit serves the riskiest first, so its labels are no sample).

    By default (what `validate_compute` reports as `report.sample`): the certify design's labels
    (taskgen/stages/certify/service.py: design_precision; judged failures have no design, and it says so). With
    `sample`, the episodes of a stratified random-sample queue (drawn by judge verdict with a fixed seed): its
    labelled members, post-stratified by judge verdict. UNSURE labels are left out.
    """
    if sample is None:
        # The certify design's statistics (numpy) load with the first estimate, not when the stages register.
        from taskgen.stages.certify.service import design_precision

        return design_precision(runs=list(runs), config=config, target_half_width=target_half_width)
    labelled, true = _LABELLED & Q(id__in=sample), _LABELLED_TRUE & Q(id__in=sample)
    yes, no = Q(cj__verdict=SUCCESS), Q(cj__verdict=NOT_SUCCESS)
    episodes = Episode.objects.filter(run_id__in=_run_ids(runs)).annotate(
        cj=FilteredRelation("judgments", condition=Q(judgments__config=config)))
    cells = episodes.aggregate(
        n_s=Count("id", filter=yes), l_s=Count("id", filter=yes & labelled), t_s=Count("id", filter=yes & true),
        n_f=Count("id", filter=no), l_f=Count("id", filter=no & labelled), t_f=Count("id", filter=no & true))
    return _sample_from(cells, target_half_width)


def default_config(*, runs: Iterable[Run]) -> JudgeConfig | None:
    """The config with the most judgments on the runs (ties: the lowest id), or None when nothing is judged."""
    return (JudgeConfig.objects.filter(judgments__episode__run_id__in=_run_ids(runs))
            .annotate(n=Count("judgments")).order_by("-n", "id").first())

