"""A run's episodes as a table to triage: the chosen judge config's verdict, the verifier, the final label and whether
the judge agrees with them, filtered (review/episode_filters.py), sorted on any column and searched, all from the URL.

The page's rows come from one query that joins the chosen config's judgment, the verifier result and the final label
(LEFT JOINs, so sorting on them is one sort of the run's rows), and one more for the rows' risk flags.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, Count, F, FilteredRelation, IntegerField, Q, QuerySet, Value, When

from review.episode_filters import EpisodeFilter, condition
from review.models import LabelVerdict
from taskgen.models import Episode, Judgment, Run, Screenshot

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


# column key -> (heading, order_by expression); a leading "-" in the URL sorts descending.
SORTS = {
    "line": ("Line", F("task_order")),
    "task": ("Task", F("task__task_id")),
    "site": ("Site", F("site__slug")),
    "kind": ("Kind", F("task_kind")),
    "steps": ("Steps", F("steps")),
    "verdict": ("Judge verdict", F("cj__verdict")),
    "verifier": ("Verifier", F("verifier_result__ok")),
    "final": ("Final label", F("final_label__verdict")),
    "agreement": ("Agreement", F("agreement")),
}


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
    raw = raw or "line"
    key = raw.lstrip("-")
    return Sort(key, raw.startswith("-")) if key in SORTS else Sort("line", False)


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
    if f.verdicts or f.disagree or f.unsupported or sort_key in ("verdict", "agreement"):
        episodes = _joined(episodes, f.config_id, agreement=sort_key == "agreement")
    return episodes.filter(condition(f, joined=True))


def run_table_order(*, run: Run, f: EpisodeFilter, sort: Sort) -> QuerySet:
    """The ids of the run's episodes that pass the filter, in the chosen order: a narrow sort (ids and the sort
    key only), so sorting 100,000 episodes does not drag their instructions along."""
    if f.config_id is None and sort.key in ("verdict", "agreement"):
        sort = Sort("line", sort.descending)  # a run nobody judged has no verdicts to sort by
    expression = SORTS[sort.key][1]
    ordering = expression.desc(nulls_last=True) if sort.descending else expression.asc(nulls_last=True)
    episodes = run_table_filtered(run=run, f=f, sort_key=sort.key)
    return episodes.order_by(ordering, "task_order", "id").values_list("pk", flat=True)


def run_table_rows(episode_ids: list[int], config_id: int | None) -> list[Episode]:
    """These episodes with what the table shows, in the order given."""
    rows = (_joined(Episode.objects.filter(pk__in=episode_ids), config_id)
            .annotate(judge_verdict=F("cj__verdict"), judge_inconsistent=F("cj__inconsistent"),
                      judge_unsupported=F("cj__unsupported_citations"))
            .select_related("task", "site", "verifier_result", "final_label")
            .only("id", "run_id", "task_order", "status", "steps", "task_kind", "task__task_id", "task__instruction",
                  "site__slug", "verifier_result__ok", "verifier_result__source", "verifier_result__detail",
                  "final_label__verdict",
                  "final_label__adjudicated"))
    by_id = {row.pk: row for row in rows}
    return [by_id[pk] for pk in episode_ids if pk in by_id]


def screenshot_counts(episode_ids: list[int]) -> dict[int, int]:
    """Screens per episode (steps and final, not training copies), for the page's rows only."""
    rows = (Screenshot.objects.filter(episode_id__in=episode_ids).exclude(kind=Screenshot.Kind.ROW)
            .values("episode_id").annotate(n=Count("id")).values_list("episode_id", "n"))
    return dict(rows)


def run_columns(sort: Sort) -> list[dict]:
    """The sortable column headings, each with the sort value a click on it asks for and its arrow."""
    return [{"key": key, "heading": heading, "param": sort.toggled(key),
             "arrow": ("▼" if sort.descending else "▲") if key == sort.key else ""}
            for key, (heading, _) in SORTS.items()]
