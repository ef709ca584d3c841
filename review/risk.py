"""Which judged episodes are likeliest to be false positives, and why: the order of the false-positive audit and the
flags of the run table.

The tiers, first match wins: the verdict contradicts its own parts; the judge cites evidence that is not there; an
action task whose session made requests but changed no data; another judge config or the verifier says otherwise;
then the rest. Each is a condition on Episode (Exists, never a join), so the audit queue can still be locked.
"""
from __future__ import annotations

from django.db.models import (
    BooleanField,
    Case,
    Exists,
    ExpressionWrapper,
    IntegerField,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)

from review.episode_filters import judge_disagrees_with_verifier
from taskgen.models import Episode, Judgment

RISKS = (
    ("inconsistent", 0, "the verdict contradicts its own parts"),
    ("unsupported", 1, "the judge cites evidence that is not there"),
    ("no_change", 2, "an action task whose session changed no data"),
    ("judges_disagree", 3, "another judge config says otherwise"),
    ("verifier_disagrees", 3, "the verifier says otherwise"),
)
LOWEST = 4


def _judgments(config_id: int | None):
    rows = Judgment.objects.filter(episode=OuterRef("pk"))
    return rows.filter(config_id=config_id) if config_id else rows


def _judges_disagree(config_id: int | None) -> Q:
    this = _judgments(config_id)
    other = Judgment.objects.filter(episode=OuterRef("pk"))
    other = other.exclude(config_id=config_id) if config_id else other
    yes, no = Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS
    return (Q(Exists(this.filter(verdict=yes))) & Q(Exists(other.filter(verdict=no)))) | (
        Q(Exists(this.filter(verdict=no))) & Q(Exists(other.filter(verdict=yes))))


def risk_conditions(config_id: int | None) -> dict[str, Q]:
    """Each risk as a condition on Episode, for the judgments of `config_id` (None: any config's)."""
    judged = _judgments(config_id)
    return {
        "inconsistent": Q(Exists(judged.filter(inconsistent=True))),
        "unsupported": Q(Exists(judged.filter(unsupported_citations__gt=0))),
        # a live-web run records no server evidence at all: only a session that made requests can show "no change"
        "no_change": Q(task_kind="action", data_changes=[]) & ~Q(request_log=[]),
        "judges_disagree": _judges_disagree(config_id),
        "verifier_disagrees": judge_disagrees_with_verifier(config_id),
    }


def risk_rank(config_id: int | None) -> Case:
    """0 for the riskiest tier .. LOWEST for the rest: an expression to order episodes by."""
    conditions = risk_conditions(config_id)
    return Case(*(When(conditions[name], then=Value(tier)) for name, tier, _ in RISKS), default=Value(LOWEST),
                output_field=IntegerField())


def risk_reasons(episode_ids: list[int], config_id: int | None) -> dict[int, list[str]]:
    """Why each of these episodes ranks where it does, in words (one query)."""
    conditions = risk_conditions(config_id)
    flags = {name: ExpressionWrapper(cond, output_field=BooleanField()) for name, cond in conditions.items()}
    most = _judgments(config_id).order_by("-unsupported_citations").values("unsupported_citations")[:1]
    rows = Episode.objects.filter(pk__in=episode_ids).annotate(
        n_unsupported=Subquery(most, output_field=IntegerField()), **flags).values("pk", "n_unsupported", *flags)
    out = {}
    for row in rows:
        reasons = [text for name, _, text in RISKS if row[name]]
        if row["unsupported"] and row["n_unsupported"]:
            n = row["n_unsupported"]
            reasons[reasons.index(RISKS[1][2])] = f"{RISKS[1][2]} ({n} citation{'s' if n != 1 else ''})"
        out[row["pk"]] = reasons
    return out
