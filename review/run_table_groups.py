"""The run table at a million episodes (PostgreSQL): how many episodes a filter keeps and how many each sort group
holds, read from validate's summary (taskgen/stages/validate/summary.py: episodes counted per run, judge config,
site, kind, verdict, verifier result and final label), and a page read group by group in line order.

A sort on a column of few values (verdict, verifier, final label, agreement, site, flags) is a sequence of groups,
each read in line order (reversed with a descending sort) through the (run, task_order) index: the page at offset O
is the groups' rows from O on, and the summary says which group O falls in, so only that group (and the next, when
the page runs over) is read, never a sort of every episode of the run. Flags have no cells: their groups are read
in turn until the page is full (page 1 at once; a later page counts the groups it passes). A filter the summary
cannot answer (search, unsupported citations, labelled, waiting for an adjudicator, tags) falls back to one sort of
the filtered rows. The summary does not know which episodes have labels, so the unlabelled episodes' cells are the
cells less the labelled episodes' cells, counted live from the labels (`labelled_cells`: labels are few beside a
run's episodes, 2% of the bench's million; the cost grows with them).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from django.db import connection
from django.db.models import CharField, Count, Exists, F, FilteredRelation, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from taskgen.models import Episode, FinalLabel, Judgment, Label, LabelVerdict, Run, Site
from taskgen.stages.validate.summary import summary_available, validate_summary_refresh
from taskgen.triage.agreement import UNKNOWN, agreement_of
from taskgen.triage.filters import EpisodeFilter
from taskgen.triage.risk import TIERS

GROUPED_SORTS = {"verdict", "verifier", "final", "agreement", "site", "flags"}
_VERIFIER = {"pass": True, "fail": False, "none": None}
_FINAL = {"final-success": LabelVerdict.SUCCESS, "final-not-success": LabelVerdict.NOT_SUCCESS,
          "final-unsure": LabelVerdict.UNSURE}
_CELL_LABEL_STATES = ("", "unlabelled", *_FINAL)


class Cell(NamedTuple):
    """Episodes of one (site, kind, verdict of the config, verifier, final label): `verdict` None when the config did
    not judge them, `verifier` None without a verifier result, `final` "" without a final label. A tuple: a run's
    cells are a thousand or more at 50 sites, made on every request."""

    site_id: int
    task_kind: str
    verdict: str | None
    verifier: bool | None
    final: str
    n: int


def cells_answer(f: EpisodeFilter) -> bool:
    """Whether the summary's cells can count this filter."""
    return not (f.search or f.unsupported or f.tags) and f.label_state in _CELL_LABEL_STATES


def _verifier(value: int) -> bool | None:
    """The summary's verifier column: -1 none, else 0 or 1."""
    return None if value < 0 else bool(value)


# Every episode of the run (config_a 0) and the config's verdicts (its own cells: config_b 0), per cell of the table
_CELLS = """
    SELECT site_id, task_kind, verifier, final, config_a, verdict_a, SUM(n)::bigint FROM review_validatecell
    WHERE run_id = %(run)s AND (config_a = 0 OR (config_a = %(config)s AND config_b = 0))
    GROUP BY site_id, task_kind, verifier, final, config_a, verdict_a"""


def run_cells(*, run: Run, config_id: int | None) -> list[Cell] | None:
    """The run's cells as of every committed write (the summary brought up to date first: cheap when little
    changed); None where the database keeps no summary (SQLite). One query read as plain tuples: at 50 sites a
    thousand rows or more, whose dicts and field conversions cost more than the query."""
    if not summary_available():
        return None
    validate_summary_refresh()
    with connection.cursor() as cursor:
        cursor.execute(_CELLS, {"run": run.pk, "config": config_id})
        rows = cursor.fetchall()
    every, cells = defaultdict(int), []
    for site_id, kind, verifier, final, config, verdict, n in rows:
        if config == 0:
            every[site_id, kind, verifier, final] += n
        else:
            every[site_id, kind, verifier, final] -= n  # what is left is unjudged by the config
            cells.append(Cell(site_id, kind, verdict, _verifier(verifier), final, n))
    return cells + [Cell(site_id, kind, None, _verifier(verifier), final, n)
                    for (site_id, kind, verifier, final), n in every.items() if n]


def labelled_cells(*, run: Run, config_id: int | None) -> list[Cell]:
    """The run's labelled episodes (any label, with a final label or not), counted live in the cells' shape."""
    episodes = Episode.objects.filter(run_id=run.pk, pk__in=Label.objects.values("episode_id"))
    verdict = Value(None, output_field=CharField())
    if config_id is not None:
        episodes = episodes.annotate(cj=FilteredRelation("judgments", condition=Q(judgments__config_id=config_id)))
        verdict = F("cj__verdict")
    rows = (episodes.annotate(verdict=verdict, verifier=F("verifier_result__ok"),
                              final=Coalesce(F("final_label__verdict"), Value("")))
            .values("site_id", "task_kind", "verdict", "verifier", "final").annotate(n=Count("pk")).order_by())
    return [Cell(r["site_id"], r["task_kind"], r["verdict"], r["verifier"], r["final"], r["n"]) for r in rows]


def _key(cell: Cell) -> tuple:
    return cell.site_id, cell.task_kind, cell.verdict, cell.verifier, cell.final


def cells_of_label_state(cells: list[Cell], *, run: Run, f: EpisodeFilter) -> list[Cell]:
    """The cells of the episodes the filter's label state can keep: the unlabelled ones are every episode less the
    labelled ones; other states are read on the cells themselves (`cell_passes`)."""
    if f.label_state != "unlabelled":
        return cells
    labelled = {_key(cell): cell.n for cell in labelled_cells(run=run, config_id=f.config_id)}
    left = [cell._replace(n=cell.n - labelled.get(_key(cell), 0)) for cell in cells]
    return [cell for cell in left if cell.n > 0]


def cell_passes(cell: Cell, f: EpisodeFilter, site_ids: set[int]) -> bool:
    """The filter (taskgen/triage/filters.py: `condition`) read on a cell; tests/test_run_table_groups.py holds the
    two readers to the same counts."""
    verdict = cell.verdict or "UNJUDGED"
    return ((not f.sites or cell.site_id in site_ids) and (not f.task_kind or cell.task_kind == f.task_kind)
            and (not f.verdicts or verdict in f.verdicts)
            and (not f.verifier or cell.verifier is _VERIFIER[f.verifier])
            and (f.label_state not in _FINAL or cell.final == _FINAL[f.label_state])
            and (not f.disagree or (verdict, cell.verifier) in ((Judgment.Verdict.SUCCESS, False),
                                                                  (Judgment.Verdict.NOT_SUCCESS, True))))


def cells_filtered(cells: list[Cell], f: EpisodeFilter) -> list[Cell]:
    site_ids = set(Site.objects.filter(slug__in=f.sites).values_list("pk", flat=True)) if f.sites else set()
    return [c for c in cells if cell_passes(c, f, site_ids)]


SMALL_GROUP = 50_000  # rows a group read from its own table may hold: sorted at once, in tens of milliseconds


@dataclass(frozen=True)
class Group:
    """One value of the sort: the condition on the table's joined rows, and how many rows hold it (None: unknown).
    `own_table`: the condition is a value of a small table's column (a final label), so a small group is read from
    that table and sorted, not found by walking the run's line order (its rows may all sit at the far end)."""

    condition: Q
    size: int | None
    own_table: bool = False


def _sized(values: list, key_of, cells: list[Cell], condition_of, own_table=lambda value: False) -> list[Group]:
    sizes = defaultdict(int)
    for cell in cells:
        sizes[key_of(cell)] += cell.n
    return [Group(condition_of(value), sizes.get(value, 0), own_table(value)) for value in values]


def sort_groups(*, key: str, descending: bool, cells: list[Cell]) -> list[Group]:
    """The sort's groups in the table's order (descending reverses the values; episodes without one come last
    either way, as the plain sort's NULLS LAST puts them)."""

    def ordered(values: list) -> list:
        return values[::-1] if descending else values

    if key == "verdict":
        values = ordered(sorted(Judgment.Verdict.values))
        return _sized([*values, None], lambda c: c.verdict, cells,
                      lambda v: Q(cj__isnull=True) if v is None else Q(cj__verdict=v))
    if key == "verifier":
        return _sized([*ordered([False, True]), None], lambda c: c.verifier, cells,
                      lambda v: Q(verifier_result__isnull=True) if v is None else Q(verifier_result__ok=v))
    if key == "final":
        return _sized([*ordered(sorted(LabelVerdict.values)), ""], lambda c: c.final, cells,
                      lambda v: _no_final_label() if v == "" else Q(final_label__verdict=v),
                      own_table=lambda v: v != "")
    if key == "agreement":
        return _sized(ordered(list(range(UNKNOWN + 1))), lambda c: agreement_of(c.verdict, c.verifier, c.final),
                      cells, lambda v: Q(agreement=v))
    if key == "site":
        present = {c.site_id for c in cells if c.n}
        slugs = list(Site.objects.filter(pk__in=present).order_by("slug").values_list("pk", flat=True))
        return _sized(ordered(slugs), lambda c: c.site_id, cells, lambda v: Q(site_id=v))
    if key == "flags":
        return [Group(Q(flags=tier), None) for tier in ordered(list(range(TIERS + 1)))]
    raise ValueError(f"no groups for sort {key!r}")


def _no_final_label() -> Q:
    """NOT EXISTS, not a LEFT JOIN's IS NULL: PostgreSQL then knows how many rows hold it (an anti-join) and walks
    the line order for a page instead of sorting every row it thinks too few to walk for."""
    return ~Q(Exists(FinalLabel.objects.filter(episode_id=OuterRef("pk"))))


def page_by_groups(rows: QuerySet, groups: list[Group], offset: int, limit: int,
                   line_order: tuple[str, str] = ("task_order", "id")) -> list[int]:
    """Episode ids `offset` to `offset + limit` of the groups in turn, each group in line order."""
    ids: list[int] = []
    for group in groups:
        if len(ids) >= limit:
            break
        if group.size is not None and offset >= group.size:
            offset -= group.size
            continue
        in_group = rows.filter(group.condition).order_by(*_line_order(line_order, group)).values_list("pk", flat=True)
        got = list(in_group[offset:offset + limit - len(ids)])
        if not got and offset and group.size is None:
            offset -= in_group.count()  # an unknown size passed over: counted once
            continue
        ids += got
        offset = 0
    return ids


def line_order(descending: bool) -> tuple[str, str]:
    """Rows of one value in line order, reversed with the sort: a descending sort is the ascending one read
    backwards (episodes without a value still last), so it walks the same index backwards."""
    return ("-task_order", "-id") if descending else ("task_order", "id")


def line_order_unwalked(line_order: tuple[str, str]) -> list:
    """Line order as expressions no index holds (`+ 0`): PostgreSQL then finds the rows by their own condition and
    sorts them, where it could walk the run's line-order index testing every episode until a page is full (a few
    known rows that may sit anywhere in a million: SMALL_GROUP)."""
    return [(F(name.lstrip("-")) + 0).desc() if name.startswith("-") else (F(name) + 0).asc() for name in line_order]


def _line_order(line_order: tuple[str, str], group: Group) -> list:
    """Line order; for a small group of a small table's value, unwalked: read from that table and sorted."""
    if not (group.own_table and group.size is not None and group.size <= SMALL_GROUP):
        return list(line_order)
    return line_order_unwalked(line_order)
