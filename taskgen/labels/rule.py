"""The final-label rule in one place: what the labels decide without an adjudicator, which episodes wait for one,
and the words every page uses to say where an episode's final label stands. `taskgen.labels.write` applies it on every
label write (see its docstring); the episode page, the adjudication list and the run table's filters read it here.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q

from taskgen.models import FinalLabel, Label, LabelVerdict


def final_verdict_of_labels(verdicts: Iterable[str]) -> str | None:
    """The final-label rule without an adjudication: the labels' verdict when they all agree, else none."""
    distinct = set(verdicts)
    return distinct.pop() if len(distinct) == 1 else None


UNSURE_RULE = ("Unsure is not a decision: an episode whose reviewers are all unsure goes to adjudication, as one "
               "whose labels disagree does; until an adjudicator decides, its final label reads Unsure and validate "
               "leaves it out.")


@dataclass(frozen=True)
class FinalLabelState:
    """Where an episode's final label stands, in words every page shows the same way."""

    code: str  # none | agreed | unsure | disagree | adjudicated
    verdict: str | None
    text: str


def _counted(verdicts: list[str]) -> str:
    names = dict(LabelVerdict.choices)
    return ", ".join(f"{verdicts.count(v)} {names[v].lower()}" for v in LabelVerdict.values if v in verdicts)


def final_label_state(*, final: FinalLabel | None, verdicts: list[str]) -> FinalLabelState:
    """The final-label rule (module docstring, UNSURE_RULE) applied to an episode's final label and labels."""
    if final is not None and final.adjudicated:
        who = final.decided_by.get_username() if final.decided_by_id else "an adjudicator"
        return FinalLabelState("adjudicated", final.verdict, f"adjudicated by {who}: {final.reason}")
    if not verdicts:
        return FinalLabelState("none", None, "No human label yet.")
    agreed = final_verdict_of_labels(verdicts)
    if agreed == LabelVerdict.UNSURE:
        return FinalLabelState("unsure", agreed, f"Every reviewer is unsure ({len(verdicts)}): that is no "
                                                 "decision, so an adjudicator decides.")
    if agreed is None:
        return FinalLabelState("disagree", None, f"The labels disagree ({_counted(verdicts)}): an adjudicator "
                                                 "decides.")
    n = len(verdicts)
    return FinalLabelState("agreed", agreed, "from the reviewer's label" if n == 1 else
                           f"from the reviewers' agreeing labels ({n})")


def needs_adjudication() -> Q:
    """The episodes `final_label_state` sends to an adjudicator, as a condition on Episode: labelled, not
    adjudicated, and with no final label (labels disagree) or an Unsure one (all unsure)."""
    settled = FinalLabel.objects.filter(episode=OuterRef("pk"), adjudicated=True)
    decided = FinalLabel.objects.filter(episode=OuterRef("pk")).exclude(verdict=LabelVerdict.UNSURE)
    return Q(~Exists(settled), ~Exists(decided), Exists(Label.objects.filter(episode=OuterRef("pk"))))

