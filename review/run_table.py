"""A run's episodes as a table to triage: the chosen judge config's verdict, the verifier, the final label and whether
the judge agrees with them, filtered (review/episode_filters.py), sorted on any column and searched, all from the URL.

The page's rows come from one query that joins the chosen config's judgment, the verifier result and the final label
(LEFT JOINs, so sorting on them, the risk flags included, is one sort of the run's rows), and one more for the rows'
risk flags in words. Every column shown sorts; a sort the table does not have is refused with a message.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, F, FilteredRelation, IntegerField, Q, QuerySet, Value, When

from review.episode_filters import EpisodeFilter, FilterError, condition
from review.models import LabelVerdict
from review.risk import risk_rank
from taskgen.models import Episode, Judgment, Run

S, NS = Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS

# Agreement of the judge with the truth there is: the final human label when it decided, else the verifier.
AGREEMENT = (
    ("false positive (final label)", Q(cj__verdict=S, final_label__verdict=LabelVerdict.NOT_SUCCESS)),
    ("false positive (verifier)", Q(cj__verdict=S, verifier_result__ok=False)),
    ("false negative (final label)", Q(cj__verdict=NS, final_label__verdict=LabelVerdict.SUCCESS)),
    ("false negative (verifier)", Q(cj__verdict=NS, verifier_result__ok=True)),
    ("agrees with the final label", Q(cj__verdict=S, final_label__verdict=S) | Q(cj__verdict=NS,
                                                                                  final_label__verdict=NS)),
    ("agrees with the verifier", Q(cj__verdict=S, verifier_result__ok=True) | Q(cj__verdict=NS,
                                                                                verifier_result__ok=False)),
)
_DECIDED_FINAL = Q(final_label__verdict__in=[LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS])
UNKNOWN = len(AGREEMENT)


def _agreement() -> Case:
    """The first AGREEMENT row that holds (a decided final label is read before the verifier), as its position."""
    whens = [When(cond if "final label" in text else cond & ~_DECIDED_FINAL, then=Value(n))
             for n, (text, cond) in enumerate(AGREEMENT)]
    return Case(*whens, default=Value(UNKNOWN), output_field=IntegerField())


def agreement_text(code: int | None) -> str:
    return AGREEMENT[code][0] if code is not None and 0 <= code < UNKNOWN else ""


# Every column the table shows, in its order: key -> (heading, what it sorts by; a function of the judge config for
# what depends on it). A leading "-" in the URL sorts descending.
SORTS = {
    "line": ("Line", F("task_order")),
    "task": ("Task", F("task__task_id")),
    "site": ("Site", F("site__slug")),
    "kind": ("Kind", F("task_kind")),
    "instruction": ("Instruction", F("task__instruction")),
    "steps": ("Steps", F("steps")),
    "screens": ("Screens", F("screens")),
    "ended": ("Ended", F("finished")),
    "verdict": ("Judge verdict", F("cj__verdict")),
    "verifier": ("Verifier", F("verifier_result__ok")),
    "final": ("Final label", F("final_label__verdict")),
    "agreement": ("Agreement", F("agreement")),
    # riskiest first (review/risk.py), as the false-positive audit takes them; read from the joined judgment
    "flags": ("Flags", lambda config_id: risk_rank(config_id, joined=config_id is not None)),
}
JOINED_SORTS = {"verdict", "agreement", "flags"}  # read the chosen config's judgment, joined as `cj`
NUMERIC = {"line", "steps", "screens"}


@dataclass(frozen=True)
class Sort:
    key: str
    descending: bool

    @property
    def param(self) -> str:
        return f"-{self.key}" if self.descending else self.key

    def toggled(self, key: str) -> str:
        """The URL value for a click on column `key`: ascending first, then descending."""
        return f"-{key}" if key == self.key and not self.descending else key


def sort_parse(raw: str | None) -> Sort:
    """The sort the URL asks for; FilterError for a column the table does not have (the page says so and sorts by
    line)."""
    raw = raw or "line"
    key = raw.lstrip("-")
    if key not in SORTS:
        raise FilterError(f"unknown sort {key[:40]!r}: use one of {', '.join(SORTS)} (a leading - sorts descending)")
    return Sort(key, raw.startswith("-"))


def _joined(episodes: QuerySet[Episode], config_id: int | None, *, agreement: bool = True) -> QuerySet[Episode]:
    episodes = episodes.annotate(cj=FilteredRelation("judgments", condition=Q(judgments__config_id=config_id)))
    return episodes.annotate(agreement=_agreement()) if agreement else episodes


def run_table_filtered(*, run: Run, f: EpisodeFilter, sort_key: str = "") -> QuerySet[Episode]:
    """The run's episodes that pass the filter. The chosen config's judgment is joined as `cj` when the filter or
    the sort reads it (then the filter reads the joined row: one pass over the run, where subqueries would each
    read the whole judgment table); the agreement only when it is the sort."""
    episodes = Episode.objects.filter(run=run)
    if f.config_id is None:
        return episodes.filter(condition(f))
    if f.verdicts or f.disagree or f.unsupported or sort_key in JOINED_SORTS:
        episodes = _joined(episodes, f.config_id, agreement=sort_key == "agreement")
    return episodes.filter(condition(f, joined=True))


def run_table_order(*, run: Run, f: EpisodeFilter, sort: Sort) -> QuerySet:
    """The ids of the run's episodes that pass the filter, in the chosen order: a narrow sort (ids and the sort
    key only), so sorting 100,000 episodes does not drag their instructions along."""
    if f.config_id is None and sort.key in ("verdict", "agreement"):
        sort = Sort("line", sort.descending)  # a run nobody judged has no verdicts to sort by
    expression = SORTS[sort.key][1]
    expression = expression(f.config_id) if callable(expression) else expression
    ordering = expression.desc(nulls_last=True) if sort.descending else expression.asc(nulls_last=True)
    episodes = run_table_filtered(run=run, f=f, sort_key=sort.key)
    return episodes.order_by(ordering, "task_order", "id").values_list("pk", flat=True)


def run_table_rows(episode_ids: list[int], config_id: int | None) -> list[Episode]:
    """These episodes with what the table shows, in the order given."""
    rows = (_joined(Episode.objects.filter(pk__in=episode_ids), config_id)
            .annotate(judge_verdict=F("cj__verdict"), judge_inconsistent=F("cj__inconsistent"),
                      judge_unsupported=F("cj__unsupported_citations"))
            .select_related("task", "site", "verifier_result", "final_label")
            .only("id", "run_id", "task_order", "status", "finished", "end_step", "end_reason", "steps", "screens",
                  "task_kind", "task__task_id", "task__instruction", "site__slug", "verifier_result__ok",
                  "verifier_result__source", "verifier_result__detail", "final_label__verdict",
                  "final_label__adjudicated"))
    by_id = {row.pk: row for row in rows}
    return [by_id[pk] for pk in episode_ids if pk in by_id]


def run_columns(sort: Sort) -> list[dict]:
    """The sortable column headings, each with the sort value a click on it asks for and its arrow."""
    return [{"key": key, "heading": heading, "param": sort.toggled(key), "numeric": key in NUMERIC,
             "arrow": ("▼" if sort.descending else "▲") if key == sort.key else ""}
            for key, (heading, _) in SORTS.items()]
