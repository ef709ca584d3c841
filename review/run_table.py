"""A run's episodes as a table to triage: the chosen judge config's verdict, the verifier, the final label and whether
the judge agrees with them, filtered (taskgen/triage/filters.py), sorted on any column and searched, all from the URL.

The page's rows come from one query that joins the chosen config's judgment, the verifier result and the final label
(LEFT JOINs, so sorting on them, the risk flags included, is one sort of the run's rows), and one more for the rows'
risk flags in words. Every column shown sorts; a sort the table does not have is refused with a message.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cached_property, reduce
from operator import or_

from django.db.models import Case, F, FilteredRelation, IntegerField, Q, QuerySet, Value, When
from django.db.models.functions import Concat, Left
from django.urls import reverse
from django.utils.text import Truncator

from review.run_table_groups import (
    GROUPED_SORTS,
    SMALL_GROUP,
    cells_answer,
    cells_filtered,
    cells_of_label_state,
    line_order,
    line_order_unwalked,
    page_by_groups,
    run_cells,
    sort_groups,
)
from taskgen.endings import ending_of
from taskgen.models import INSTRUCTION_SORT_CHARS, Episode, LabelVerdict, Run, VerifierResult
from taskgen.triage.agreement import AGREEMENT, LABEL_NS, LABEL_S, UNKNOWN, agreement_of, agreement_text
from taskgen.triage.filters import EpisodeFilter, FilterError, condition
from taskgen.triage.risk import risk_rank

_DECIDED_FINAL = Q(final_label__verdict__in=[LABEL_S, LABEL_NS])


def _agreement_condition(source: str, pairs: tuple) -> Q:
    truth = "final_label__verdict" if source == "final" else "verifier_result__ok"
    held = reduce(or_, (Q(cj__verdict=verdict, **{truth: value}) for verdict, value in pairs))
    return held if source == "final" else held & ~_DECIDED_FINAL


def _agreement() -> Case:
    """The first AGREEMENT row that holds, as its position."""
    whens = [When(_agreement_condition(source, pairs), then=Value(n)) for n, (_, source, pairs) in enumerate(AGREEMENT)]
    return Case(*whens, default=Value(UNKNOWN), output_field=IntegerField())


# Every column the table shows, in its order: key -> (heading, what it sorts by; a function of the judge config for
# what depends on it). A leading "-" in the URL sorts descending.
SORTS = {
    "line": ("Line", F("task_order")),
    "task": ("Task", F("task__task_id")),
    "site": ("Site", F("site__slug")),
    "kind": ("Kind", F("task_kind")),
    # its first 500 characters, as the index that serves the sort holds them (taskgen/models.py: Task)
    "instruction": ("Instruction", Left("task__instruction", INSTRUCTION_SORT_CHARS)),
    "steps": ("Steps", F("steps")),
    "screens": ("Screens", F("screens")),
    "ended": ("Ended", F("finished")),
    "verdict": ("Judge verdict", F("cj__verdict")),
    "verifier": ("Verifier", F("verifier_result__ok")),
    "final": ("Final label", F("final_label__verdict")),
    "agreement": ("Agreement", F("agreement")),
    # riskiest first (taskgen/triage/risk.py), as the false-positive audit takes them; read from the joined judgment
    "flags": ("Flags", lambda config_id: risk_rank(config_id, joined=config_id is not None)),
}
# The columns of the episode that an index of the run holds in sort order (taskgen/models/episodes.py): a few known
# matches are sorted on them as no index holds them (_unwalked), never found by walking one of those indexes.
INDEXED_SORTS = {"steps", "screens", "kind", "ended"}
JOINED_SORTS = {"verdict", "agreement", "flags"}  # read the chosen config's judgment, joined as `cj`
NUMERIC = {"line", "steps", "screens"}
# Columns an episode may have no value in (sorted last either way); the others sort plain, so a descending sort walks
# its index backwards (NULLS LAST on a column that holds none would make PostgreSQL sort every row instead).
NULLABLE = {"verdict", "verifier", "final"}


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


def _sort_expression(key: str, config_id: int | None):
    expression = SORTS[key][1]
    return expression(config_id) if callable(expression) else expression


def _unwalked(key: str):
    """Sort `key`'s column as an expression no index holds: a number + 0, a text || '' (as line_order_unwalked)."""
    column = SORTS[key][1]
    return column + 0 if key in NUMERIC else Concat(column, Value(""))


def _usable(sort: Sort, f: EpisodeFilter) -> Sort:
    if f.config_id is None and sort.key in ("verdict", "agreement"):
        return Sort("line", sort.descending)  # a run nobody judged has no verdicts to sort by
    return sort


def run_table_order(*, run: Run, f: EpisodeFilter, sort: Sort, few: bool = False) -> QuerySet:
    """The ids of the run's episodes that pass the filter, in the chosen order: a narrow sort (ids and the sort
    key only), so sorting 100,000 episodes does not drag their instructions along. `few`: the filter is known to
    pass few episodes (counted), so they are found by the filter and sorted, never by walking the run's line order
    or a column's index in order (line_order_unwalked, _unwalked)."""
    sort = _usable(sort, f)
    episodes = run_table_filtered(run=run, f=f, sort_key=sort.key)
    lines = line_order_unwalked(line_order(sort.descending)) if few else line_order(sort.descending)
    if sort.key == "line":
        return episodes.order_by(*lines).values_list("pk", flat=True)
    unwalked = few and sort.key in INDEXED_SORTS
    expression = _unwalked(sort.key) if unwalked else _sort_expression(sort.key, f.config_id)
    nulls = {"nulls_last": True} if sort.key in NULLABLE else {}
    ordering = expression.desc(**nulls) if sort.descending else expression.asc(**nulls)
    return episodes.order_by(ordering, *lines).values_list("pk", flat=True)


class TableRows:
    """The ids of the run's table in order, as a Paginator pages them (`rows[start:stop]`, `len(rows)`). Where
    validate's summary can count the filter (PostgreSQL), the count comes from its cells and a sort on a column of
    few values reads only the groups the page falls in (review/run_table_groups.py); otherwise one count and one
    sort of the filtered rows."""

    def __init__(self, *, run: Run, f: EpisodeFilter, sort: Sort) -> None:
        self.run, self.f, self.sort = run, f, _usable(sort, f)
        self.every = run_cells(run=run, config_id=f.config_id)
        self.cells = (cells_filtered(cells_of_label_state(self.every, run=run, f=f), f)
                      if self.every is not None and cells_answer(f) else None)

    @cached_property
    def total(self) -> int:
        """The run's episodes, filtered or not (a count of a million index entries is most of a page's time)."""
        return sum(cell.n for cell in self.every) if self.every is not None else self.run.episodes.count()

    @cached_property
    def count(self) -> int:
        if self.cells is not None:
            return sum(cell.n for cell in self.cells)
        return run_table_filtered(run=self.run, f=self.f).count()

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, item: slice) -> list[int]:
        key = self.sort.key
        if self.cells is None or key not in GROUPED_SORTS:
            # A search's matches are counted first from its trigram indexes (exact, whatever the statistics say);
            # PostgreSQL's own guess at a substring's share of a million instructions comes from a random sample,
            # and a sample that overrated "item 4242" had it walk the whole run for 50 rows: a second, not 40 ms.
            few = bool(self.f.search) and self.count <= SMALL_GROUP
            return list(run_table_order(run=self.run, f=self.f, sort=self.sort, few=few)[item])
        rows = run_table_filtered(run=self.run, f=self.f, sort_key=key)
        if key == "flags":
            rows = rows.annotate(flags=_sort_expression(key, self.f.config_id))
        groups = sort_groups(key=key, descending=self.sort.descending, cells=self.cells)
        return page_by_groups(rows, groups, item.start or 0, item.stop - (item.start or 0),
                              line_order(self.sort.descending))



_ROW_FIELDS = ("pk", "task_order", "status", "finished", "end_step", "end_reason", "steps", "screens", "task_kind",
               "task__task_id", "task__instruction", "site__slug", "verifier_result__ok", "verifier_result__detail",
               "final_label__verdict", "final_label__adjudicated")
_FINAL_WORDS = dict(LabelVerdict.choices)


def run_table_rows(episode_ids: list[int], config_id: int | None) -> list[dict]:
    """These episodes as the table shows them, in the order given: one dict of cells a row, each read and put in
    words here, once (one query of plain values: no model instances, and a template reads a dict's key for a
    fraction of what a model's attribute or method costs it)."""
    rows = _joined(Episode.objects.filter(pk__in=episode_ids), config_id, agreement=False).values(
        *_ROW_FIELDS, verdict=F("cj__verdict"))
    url = reverse("review:episode_detail", args=[_ANY_PK]).replace(str(_ANY_PK), "{}")  # one reverse a page
    by_id = {row["pk"]: _cells(row, url.format(row["pk"])) for row in rows}
    return [by_id[pk] for pk in episode_ids if pk in by_id]


_ANY_PK = 918273645  # stands for each row's id in the episode page's URL


def _cells(row: dict, url: str) -> dict:
    """A row's cells: the episode's ending, the verifier's reason, the final label and the agreement in words."""
    ending = ending_of(finished=row["finished"], end_reason=row["end_reason"], end_step=row["end_step"])
    ok, final = row["verifier_result__ok"], row["final_label__verdict"]
    why = VerifierResult.reason_of(ok, row["verifier_result__detail"]) if ok is False else ""
    return {"pk": row["pk"], "task_order": row["task_order"], "steps": row["steps"], "screens": row["screens"],
            "url": url, "task_id": row["task__task_id"], "site": row["site__slug"], "task_kind": row["task_kind"],
            "instruction": _cut(row["task__instruction"], 110), "end_reason": _cut(row["end_reason"], 300),
            "failed": row["status"] == Episode.Status.FAILED, "ending_kind": ending.kind, "ending": ending.short,
            "verdict": row["verdict"], "verifier": ok, "verifier_why": why, "verifier_why_short": _cut(why, 80),
            "final": _FINAL_WORDS.get(final, final) if final else "", "adjudicated": row["final_label__adjudicated"],
            "agreement": agreement_text(agreement_of(row["verdict"], ok, final or ""))}


def _cut(text: str, chars: int) -> str:
    """The text as the template's truncatechars cuts it (Truncator), without Truncator's work for one that fits."""
    if len(text) <= chars and unicodedata.is_normalized("NFC", text):
        return text
    return Truncator(text).chars(chars)


def run_columns(sort: Sort) -> list[dict]:
    """The sortable column headings, each with the sort value a click on it asks for and its arrow."""
    return [{"key": key, "heading": heading, "param": sort.toggled(key), "numeric": key in NUMERIC,
             "arrow": ("▼" if sort.descending else "▲") if key == sort.key else ""}
            for key, (heading, _) in SORTS.items()]
