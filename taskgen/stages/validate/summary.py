"""Validate's summary on PostgreSQL: episodes counted per (run, judge config, site, task kind, verdict, verifier
result, final label), and per pair of configs' verdicts, so the page sums a few hundred rows instead of joining
every episode with its judgments, verifier result and final label.

Triggers (review/migrations/0006_validate_summary.py) mark an episode whenever one of its judgments, its verifier
result, its final label or its run, site or kind is written, by any writer (the judge, the import, a label, the
admin, a bulk COPY). `validate_summary_refresh` takes the marked episodes out of the cells they counted in and puts
them back where they count now, in one statement under a lock, so the cells always equal a count from scratch of the
committed rows; the page refreshes before it reads. A chunk takes all the marks of its episodes (up to the refresh's
last mark): an episode imported, judged twice and verified is re-summed once, not four times. `summary_cells`
answers what the live grouped query answers (`service._live_cells`), in the same shape. Each re-summed episode is
also marked for its kept risks to be re-read (taskgen/triage/risks_kept.py) when they are next read. The same
statement moves each run's count and sums of episode ids (RunEpisodes: the export order's signature) by the episodes
it takes out of a run and puts in.
"""
from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction

from taskgen.triage.risks_kept import risks_refresh

_LOCK = 7_318_412  # pg_advisory_xact_lock key: one refresh at a time
_KEYS = "run_id, site_id, task_kind, config_a, config_b, verdict_a, verdict_b, verifier, final"
_REFRESH = f"""
WITH chunk AS (
    SELECT DISTINCT episode_id FROM (
        SELECT episode_id FROM review_validatedirtyepisode WHERE id <= %(upto)s ORDER BY id LIMIT %(chunk)s) first),
marked AS (
    DELETE FROM review_validatedirtyepisode d USING chunk
    WHERE d.episode_id = chunk.episode_id AND d.id <= %(upto)s
    RETURNING d.episode_id),
episodes AS (SELECT DISTINCT episode_id AS id FROM marked),
risks_to_read AS (INSERT INTO taskgen_riskdirtyepisode (episode_id) SELECT id FROM episodes),
taken_out AS (
    DELETE FROM review_validateepisodecell c USING episodes WHERE c.episode_id = episodes.id
    RETURNING c.episode_id, {_KEYS}, -1 AS n, -cost_a AS cost_a, -cost_b AS cost_b),
facts AS (
    SELECT e.id, e.run_id, e.site_id, e.task_kind, COALESCE(v.ok::int, -1) AS verifier,
           COALESCE(f.verdict, '') AS final
    FROM taskgen_episode e JOIN episodes ON episodes.id = e.id
    LEFT JOIN taskgen_verifierresult v ON v.episode_id = e.id LEFT JOIN review_finallabel f ON f.episode_id = e.id),
counts AS (
    SELECT id, run_id, site_id, task_kind, 0::bigint AS config_a, 0::bigint AS config_b, ''::varchar AS verdict_a,
           ''::varchar AS verdict_b, verifier, final, 0::numeric AS cost_a, 0::numeric AS cost_b FROM facts
    UNION ALL
    SELECT f.id, run_id, site_id, task_kind, a.config_id, 0, a.verdict, '', verifier, final, a.cost_usd, 0
    FROM facts f JOIN taskgen_judgment a ON a.episode_id = f.id
    UNION ALL
    SELECT f.id, run_id, site_id, task_kind, a.config_id, b.config_id, a.verdict, b.verdict, verifier, final,
           a.cost_usd, b.cost_usd
    FROM facts f JOIN taskgen_judgment a ON a.episode_id = f.id
    JOIN taskgen_judgment b ON b.episode_id = f.id AND b.config_id > a.config_id),
put_in AS (
    INSERT INTO review_validateepisodecell (episode_id, {_KEYS}, cost_a, cost_b) SELECT * FROM counts
    RETURNING episode_id, {_KEYS}, 1 AS n, cost_a, cost_b),
members AS (
    INSERT INTO taskgen_runepisodes (run_id, episodes, id_sum, id_square_sum)
    SELECT run_id, sum(n), sum(n * episode_id), sum(n * episode_id::numeric * episode_id)
    FROM (SELECT run_id, episode_id, n FROM taken_out WHERE config_a = 0
          UNION ALL SELECT run_id, episode_id, n FROM put_in WHERE config_a = 0) d GROUP BY run_id
    ON CONFLICT (run_id) DO UPDATE SET episodes = taskgen_runepisodes.episodes + excluded.episodes,
        id_sum = taskgen_runepisodes.id_sum + excluded.id_sum,
        id_square_sum = taskgen_runepisodes.id_square_sum + excluded.id_square_sum),
moved AS (
    SELECT {_KEYS}, sum(n) AS n, sum(cost_a) AS cost_a, sum(cost_b) AS cost_b
    FROM (SELECT {_KEYS}, n, cost_a, cost_b FROM taken_out UNION ALL SELECT {_KEYS}, n, cost_a, cost_b FROM put_in) d
    GROUP BY {_KEYS})
INSERT INTO review_validatecell ({_KEYS}, n, cost_a, cost_b) SELECT * FROM moved
ON CONFLICT ({_KEYS}) DO UPDATE SET n = review_validatecell.n + excluded.n,
    cost_a = review_validatecell.cost_a + excluded.cost_a, cost_b = review_validatecell.cost_b + excluded.cost_b
"""  # noqa: S608 (only the constant column list above is formatted in)
_READ = """
SELECT site_id, task_kind, config_a, config_b, verdict_a, verdict_b, verifier, final,
       sum(n)::bigint, sum(cost_a), sum(cost_b)
FROM review_validatecell
WHERE run_id = ANY(%(runs)s) AND (config_a = 0 OR (config_b = 0 AND config_a = ANY(%(configs)s))
                                 OR (config_a = %(low)s AND config_b = %(high)s))
GROUP BY site_id, task_kind, config_a, config_b, verdict_a, verdict_b, verifier, final
HAVING sum(n) <> 0
"""


_KEPT_IN: set[str] = set()  # databases seen to have the triggers (they stay once made)


def summary_available() -> bool:
    """The summary is kept on PostgreSQL, by its triggers; elsewhere (or in a database made without the migrations'
    triggers, e.g. restored from a data-only dump) validate counts live."""
    if connection.vendor != "postgresql":
        return False
    name = connection.settings_dict["NAME"]
    if name not in _KEPT_IN:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_trigger WHERE tgname = 'review_validate_final'")
            if cursor.fetchone():
                _KEPT_IN.add(name)
    return name in _KEPT_IN


CHUNK = 5000  # marks re-summed per transaction: a big import's marks never hold the lock for long


def validate_summary_refresh() -> None:
    """Bring the cells up to date with every write committed before the call (cheap when few episodes changed); the
    page and the periodic task call it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM review_validatedirtyepisode")
        upto = cursor.fetchone()[0]
    while upto is not None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
            cursor.execute(_REFRESH, {"upto": upto, "chunk": CHUNK})
            cursor.execute("DELETE FROM review_validatecell WHERE n = 0")
            cursor.execute("SELECT min(id) FROM review_validatedirtyepisode WHERE id <= %s", [upto])
            if cursor.fetchone()[0] is None:
                break


def summary_and_risks_refresh() -> None:
    """Bring the cells and the kept risks up to date (what a reader of the kept risks calls first)."""
    validate_summary_refresh()
    risks_refresh()


def _fetch(run_ids: list[int], config_id: int, other_id: int | None) -> list[tuple]:
    validate_summary_refresh()
    low, high = sorted((config_id, other_id or -1))
    params = {"runs": run_ids, "configs": [config_id, other_id or config_id], "low": low, "high": high}
    with connection.cursor() as cursor:
        cursor.execute(_READ, params)
        return cursor.fetchall()


class _Cells:
    """The summary's rows for one request, per (site, kind, verifier, final): every episode, each config's verdicts,
    and the two configs' verdicts together (oriented as config, other)."""

    def __init__(self, rows: list[tuple], config_id: int, other_id: int | None) -> None:
        self.every: dict = defaultdict(int)
        self.alone: dict = {config_id: defaultdict(dict), other_id: defaultdict(dict)}
        self.pairs: dict = defaultdict(dict)
        for site, kind, a, b, va, vb, verifier, final, n, cost_a, cost_b in rows:
            key = (site, kind, verifier, final)
            if a == 0:
                self.every[key] += n
            elif b == 0:
                self.alone[a][key][va] = (n, cost_a)
            elif a == config_id:
                self.pairs[key][(va, vb)] = (n, cost_a, cost_b)
            else:
                self.pairs[key][(vb, va)] = (n, cost_b, cost_a)


def _row(key: tuple, verdict, n: int, cost, other=(), other_cost=None) -> dict:
    site, kind, verifier, final = key
    row = {"site_id": site, "task_kind": kind, "cj__verdict": verdict, "verifier": verifier, "final": final or None,
           "n": n, "cost": cost}
    if other != ():
        row.update(oj__verdict=other, other_cost=other_cost)
    return row


def _one_config(cells: _Cells, config_id: int) -> list[dict]:
    rows = []
    for key, total in cells.every.items():
        judged = cells.alone[config_id].get(key, {})
        rows += [_row(key, verdict, n, cost) for verdict, (n, cost) in judged.items()]
        if unjudged := total - sum(n for n, _ in judged.values()):
            rows.append(_row(key, None, unjudged, None))
    return rows


def _only(alone: dict, pairs: dict, side: int) -> dict:
    """One config's verdicts on the episodes the other did not judge: its own counts less the pairs'."""
    left = {verdict: [n, cost] for verdict, (n, cost) in alone.items()}
    for verdicts, (n, *costs) in pairs.items():
        left[verdicts[side]][0] -= n
        left[verdicts[side]][1] -= costs[side]
    return {verdict: (n, cost) for verdict, (n, cost) in left.items() if n}


def _two_configs(cells: _Cells, config_id: int, other_id: int) -> list[dict]:
    rows = []
    for key, total in cells.every.items():
        pairs = cells.pairs.get(key, {})
        rows += [_row(key, a, n, ca, b, cb) for (a, b), (n, ca, cb) in pairs.items()]
        only_a = _only(cells.alone[config_id].get(key, {}), pairs, 0)
        only_b = _only(cells.alone[other_id].get(key, {}), pairs, 1)
        rows += [_row(key, a, n, cost, None, None) for a, (n, cost) in only_a.items()]
        rows += [_row(key, None, n, None, b, cost) for b, (n, cost) in only_b.items()]
        neither = total - sum(n for n, *_ in pairs.values()) - sum(n for n, _ in only_a.values()) - sum(
            n for n, _ in only_b.values())
        if neither:
            rows.append(_row(key, None, neither, None, None, None))
    return rows


def summary_cells(run_ids: list[int], config_id: int, other_id: int | None) -> list[dict]:
    """The runs' episodes counted per (site, kind, the config's verdict, verifier result, final label[, the other
    config's verdict]), with the judgments' cost: each row's `verifier` is 1, 0 or -1 (none), `final` a verdict or
    None, a verdict None where the config gave no judgment."""
    cells = _Cells(_fetch(run_ids, config_id, other_id), config_id, other_id)
    if other_id is None:
        return _one_config(cells, config_id)
    return _two_configs(cells, config_id, other_id)

