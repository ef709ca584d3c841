"""Which judged episodes are likeliest to be false positives, and why: the order of the false-positive audit and the
flags of the run table.

The tiers, first match wins: the verdict contradicts its own parts; the judge cites evidence that is not there; an
action task whose session made requests but changed no data; another judge config or the verifier says otherwise;
then the rest. Each risk is defined once, as the set of episodes it holds, and read two ways: as a filter (`id IN
(...)`, one hashed or indexed lookup however many episodes there are) when a queue takes its riskiest episodes tier
by tier, and as a correlated EXISTS when a page explains the reasons of its few rows. Neither joins, so the audit
queue can still be locked row by row.
"""
from __future__ import annotations

from functools import reduce
from operator import or_

from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    ExpressionWrapper,
    Func,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    When,
)
from django.db.models.lookups import GreaterThan

from taskgen.id_arrays import among, id_array, ids_literal
from taskgen.models import Episode, Judgment, VerifierResult
from taskgen.triage.filters import Facts, JoinedFacts, judge_disagrees_with_verifier

YES, NO = Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS
RISKS = (
    ("inconsistent", 0, "the verdict contradicts its own parts"),
    ("unsupported", 1, "the judge cites evidence that is not there"),
    ("no_change", 2, "an action task whose session changed no data"),
    ("judges_disagree", 3, "another judge config says otherwise"),
    ("verifier_disagrees", 3, "the verifier says otherwise"),
)
TIERS = 4  # 0..3 as above; the rest come last
RISK_NAMES = tuple(name for name, _, _ in RISKS)
RISK_WORDS = {name: text for name, _, text in RISKS} | {"rest": "none of these risks"}


class StoredSize(Func):
    """A JSON field's stored size in bytes, read without fetching or decompressing the value (PostgreSQL keeps a large
    one out of line: comparing it with '[]' would fetch every episode's whole request log)."""

    function = "pg_column_size"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, function="length", **extra)


_EMPTY_LIST_MAX_BYTES = 16  # '[]' is 8 bytes in PostgreSQL, 2 characters in SQLite: a larger value is not empty


def _empty_list(field: str) -> Case:
    """`field` holds [] (compared only when its stored size allows it: CASE tries its branches in order)."""
    return Case(When(GreaterThan(StoredSize(field), _EMPTY_LIST_MAX_BYTES), then=False),
                When(Q(**{field: []}), then=True), default=False, output_field=BooleanField())


# a live-web run records no server evidence at all: only a session that made requests can show "no change"
_NO_CHANGE = Q(task_kind="action") & Q(_empty_list("data_changes")) & ~Q(_empty_list("request_log"))


def risk_conditions(config_id: int | None, *, correlated: bool = False, joined: bool = False) -> dict[str, Q]:
    """Each risk as a condition on Episode for the judgments of `config_id` (None: any config's): uncorrelated to
    filter many episodes, correlated for a handful of known rows, joined to read the row a run table query joins
    (review/episode_filters.Facts, JoinedFacts)."""
    facts = JoinedFacts(config_id) if joined else Facts(config_id, correlated=correlated)
    return {
        "inconsistent": facts.judged(inconsistent=True),
        "unsupported": facts.judged(unsupported_citations__gt=0),
        "no_change": _NO_CHANGE,
        "judges_disagree": (facts.judged(verdict=YES) & facts.judged_by_another(NO)) | (
            facts.judged(verdict=NO) & facts.judged_by_another(YES)),
        "verifier_disagrees": judge_disagrees_with_verifier(facts),
    }


def risk_tiers(episodes: QuerySet[Episode], config_id: int | None) -> list[QuerySet[Episode]]:
    """The episodes split by risk tier, riskiest tier first, each holding only the episodes no earlier tier holds:
    taking from them in turn reads them in risk order without ranking every episode first."""
    conditions = risk_conditions(config_id)
    tiers, earlier = [], None
    for tier in range(TIERS):
        cond = reduce(or_, (conditions[name] for name, risk_tier, _ in RISKS if risk_tier == tier))
        tiers.append(episodes.filter(cond) if earlier is None else episodes.filter(cond).exclude(earlier))
        earlier = cond if earlier is None else earlier | cond
    tiers.append(episodes.exclude(earlier))
    return tiers


def risk_rank(config_id: int | None, *, joined: bool = False) -> Case:
    """Each episode's risk tier as a number (0: riskiest, TIERS: none), the order of risk_tiers as one expression:
    the run table's Flags column sorts by it (`joined`: from the judgment its query joins as `cj`)."""
    conditions = risk_conditions(config_id, joined=joined)
    whens = [When(reduce(or_, (conditions[name] for name, risk_tier, _ in RISKS if risk_tier == tier)), then=tier)
             for tier in range(TIERS)]
    return Case(*whens, default=TIERS, output_field=IntegerField())


def risk_reasons(episode_ids: list[int], config_id: int | None, *,
                 verifier: bool = True) -> dict[int, list[str]]:
    """Why each of these episodes ranks where it does, in words (one query); `verifier=False` leaves the verifier
    out (a queue that mixes known-truth checks must not show the truth before the reviewer labels)."""
    rows = _reasons_read(episode_ids, config_id)
    if not verifier:
        rows = [{**row, "verifier_disagrees": False} for row in rows]
    return {row["pk"]: _reasons_of(row) for row in rows}


_REASON_COLUMNS = ("pk", "n_unsupported", "verifier_result__ok", "verifier_result__detail", *RISK_NAMES)
_REASONS_SQL: dict[int | None, tuple[str, list, int]] = {}  # config -> its SQL, params, the ids' slot


def _reasons_query(episodes, config_id: int | None) -> QuerySet:
    """The rows `risk_reasons` reads: each episode's risks (the correlated conditions), its most unsupported
    citations and its verifier result."""
    conditions = risk_conditions(config_id, correlated=True)
    flags = {name: ExpressionWrapper(cond, output_field=BooleanField()) for name, cond in conditions.items()}
    judged = Judgment.objects.filter(episode=OuterRef("pk"))
    judged = judged.filter(config_id=config_id) if config_id else judged
    most = judged.order_by("-unsupported_citations").values("unsupported_citations")[:1]
    return Episode.objects.filter(episodes).annotate(
        n_unsupported=Subquery(most, output_field=IntegerField()), **flags).values(*_REASON_COLUMNS)


def _reasons_read(episode_ids: list[int], config_id: int | None) -> list[dict]:
    """`_reasons_query`'s rows for these episodes. On PostgreSQL its SQL is built once per config and process, with
    the ids one array parameter (building and compiling five correlated conditions was ~20 ms of every run page and
    audit page, the SQL itself ~1 ms); elsewhere the ORM builds it each time."""
    if connection.vendor != "postgresql":
        return list(_reasons_query(Q(pk__in=episode_ids), config_id))
    if config_id not in _REASONS_SQL:
        marker = ids_literal([-1])  # no episode has it: its place among the params is where the ids go
        sql, params = _reasons_query(among(Episode, [-1]), config_id).query.sql_with_params()
        _REASONS_SQL[config_id] = (sql, list(params), list(params).index(marker))
    sql, params, slot = _REASONS_SQL[config_id]
    params = [*params[:slot], ids_literal(episode_ids), *params[slot + 1:]]
    detail = VerifierResult._meta.get_field("detail")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [dict(zip(_REASON_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        row["verifier_result__detail"] = detail.from_db_value(row["verifier_result__detail"], None, connection)
    return rows


def _reasons_of(row: dict) -> list[str]:
    """A row's risks in words, with how many citations are unsupported and which of the verifier's checks decided."""
    words = dict(RISK_WORDS)
    if row["unsupported"] and row["n_unsupported"]:
        n = row["n_unsupported"]
        words["unsupported"] = f"{words['unsupported']} ({n} citation{'s' if n != 1 else ''})"
    why = VerifierResult.reason_of(row["verifier_result__ok"], row["verifier_result__detail"])
    if why:
        words["verifier_disagrees"] = f"{words['verifier_disagrees']}: it {why}"
    return [words[name] for name, _, _ in RISKS if row[name]]


STRATA = (*RISK_NAMES, "rest")  # a certificate's strata: each episode in the first risk it holds, in this order


class RiskError(ValueError):
    """A risk name that does not exist (the message lists the known ones)."""


def risk_names_check(names) -> tuple[str, ...]:
    """Risk names as given (a comma-separated string or a list), checked, in the audit's order."""
    raw = names.split(",") if isinstance(names, str) else list(names or ())
    wanted = {str(name).strip() for name in raw if str(name).strip()}
    unknown = sorted(wanted - set(RISK_NAMES))
    if unknown:
        raise RiskError(f"unknown risk {', '.join(unknown)}: use {', '.join(RISK_NAMES)}")
    return tuple(name for name in RISK_NAMES if name in wanted)


def risk_sets(episodes: QuerySet[Episode], config_id: int | None, *, correlated: bool = False) -> dict[str, set[int]]:
    """The ids of these episodes that hold each risk (one query per risk; an episode may hold several);
    `correlated` for a few thousand known episodes (an export's chunk), where hashing every judgment of the
    database for each risk costs more than looking each episode up."""
    conditions = risk_conditions(config_id, correlated=correlated)
    if not correlated:
        conditions |= _disagreements_as_joins(config_id)
    return {name: set(episodes.filter(conditions[name]).order_by().values_list("pk", flat=True)) for name in RISK_NAMES}


def risk_id_arrays(episodes: QuerySet[Episode], config_id: int | None) -> dict:
    """The same sets as `risk_sets` over a whole run's episodes, each an int64 numpy array (id_array: one row a
    risk, not one Python row an episode)."""
    conditions = risk_conditions(config_id) | _disagreements_as_joins(config_id)
    return {name: id_array(episodes.filter(conditions[name])) for name in RISK_NAMES}


def _disagreements_as_joins(config_id: int | None) -> dict[str, Q]:
    """The two disagreement risks (as `risk_conditions` states them) as one `id IN (a join)` each, for reading a
    whole run's sets: stated as an OR of `id IN (...)`, PostgreSQL cannot join them, and a set larger than work_mem
    cannot be hashed either, so each episode scanned the other set in full (a run of a million episodes: a query of
    over fifteen minutes); a join of the judgments with the other configs' or the verifier's is one hash join."""
    mine = Judgment.objects.filter(config_id=config_id) if config_id else Judgment.objects.all()
    # the opposite verdict is another config's: an episode has one judgment per config
    judges = mine.filter(Q(verdict=YES, episode__judgments__verdict=NO) | Q(
        verdict=NO, episode__judgments__verdict=YES))
    verifier = mine.filter(Q(verdict=YES, episode__verifier_result__ok=False) | Q(
        verdict=NO, episode__verifier_result__ok=True))
    return {"judges_disagree": Q(pk__in=judges.values("episode_id")),
            "verifier_disagrees": Q(pk__in=verifier.values("episode_id"))}


def risk_stratum(episode_id: int, sets: dict[str, set[int]]) -> str:
    """The episode's stratum: the first risk it holds (the audit's order), else "rest"."""
    return next((name for name in RISK_NAMES if episode_id in sets[name]), "rest")
