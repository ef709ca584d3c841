"""Each judgment's risks kept as bits (taskgen.models.EpisodeRisks), re-read whenever validate's summary re-sums an
episode, so a whole run's judged successes and the risks they hold come out of one index scan.

The risks are the ones `risk_conditions` states (the correlated form, for a chunk of marked episodes): this module
only stores its answers. The triggers of validate's summary mark an episode at every write a risk reads (its
judgments, any config's, its verifier result, its task kind and run, and its evidence: taskgen migration 0022);
`validate_summary_refresh` passes each episode it re-sums on (RiskDirtyEpisode, in its own statement), and
`risks_refresh` re-reads those when the kept risks are about to be read: a page that reads only the cells never
pays for them. Read after both refreshes, the kept bits are the risks of the committed rows, like the cells.
PostgreSQL only, like the summary.
"""
from __future__ import annotations

from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F

from taskgen.id_arrays import id_array, ids_literal
from taskgen.models import Episode, EpisodeRisks, Judgment
from taskgen.triage.risk import RISK_NAMES, risk_conditions

_BITS = 6  # an episode id and its risks packed into one integer for the read: id << _BITS | risks
if len(RISK_NAMES) > _BITS:  # pragma: no cover - a seventh risk needs a wider packing
    raise RuntimeError("more risks than kept bits: widen _BITS")
_INSERT = """
INSERT INTO taskgen_episoderisks (episode_id, run_id, config_id, verdict, risks)
SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::varchar[], %s::smallint[])
"""


def risk_bits(held: dict[str, bool]) -> int:
    """The risks held as one integer: bit i for the i-th of RISK_NAMES."""
    return sum(1 << i for i, name in enumerate(RISK_NAMES) if held[name])


def risk_masks(episode_ids: list[int]) -> list[tuple[int, int, int, str, int]]:
    """(episode, run, config, verdict, risk bits) for every judgment of these episodes (a chunk: one query for the
    judgments, one per judge config among them for the risks)."""
    judged = list(Judgment.objects.filter(episode_id__in=episode_ids).values_list(
        "episode_id", "episode__run_id", "config_id", "verdict"))
    bits: dict[tuple[int, int], int] = {}
    for config_id in {config for _, _, config, _ in judged}:
        conditions = risk_conditions(config_id, correlated=True)
        flags = {name: ExpressionWrapper(conditions[name], output_field=BooleanField()) for name in RISK_NAMES}
        ids = [episode for episode, _, config, _ in judged if config == config_id]
        for row in Episode.objects.filter(pk__in=ids).annotate(**flags).values("pk", *RISK_NAMES):
            bits[(row["pk"], config_id)] = risk_bits(row)
    return [(episode, run, config, verdict, bits[(episode, config)]) for episode, run, config, verdict in judged]


def risks_keep(episode_ids: list[int]) -> None:
    """Re-read these episodes' kept risks from their committed rows (inside the summary refresh's transaction)."""
    rows = risk_masks(episode_ids)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM taskgen_episoderisks WHERE episode_id = ANY(%s)", [list(episode_ids)])
        if rows:
            cursor.execute(_INSERT, [list(column) for column in zip(*rows, strict=True)])


_LOCK = 7_318_413  # pg_advisory_xact_lock key: one re-read of the kept risks at a time (the summary's is ..412)
CHUNK = 5000  # marked episodes re-read per transaction
BULK = 50_000  # episodes re-read by one refresh after which the table's statistics are read again (ANALYZE)
_TAKE = """
DELETE FROM taskgen_riskdirtyepisode WHERE id IN (
    SELECT id FROM taskgen_riskdirtyepisode WHERE id <= %s ORDER BY id LIMIT %s)
RETURNING episode_id
"""


def risks_refresh() -> None:
    """Re-read the kept risks of every episode validate's summary has re-summed since they were last read (call it
    after `validate_summary_refresh`, before reading them; beat does too): a chunk a transaction, under a lock, each
    from the rows committed when its transaction reads them. After a bulk re-read (a load, an upgrade) the table's
    statistics are brought up to date at once: read with the empty table's, a few thousand ids looked up by episode
    were a sequential scan of a million rows (0.2 s against 0.02 s), and autovacuum may be late, or off."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM taskgen_riskdirtyepisode")
        upto = cursor.fetchone()[0]
    reread = 0
    while upto is not None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
            cursor.execute(_TAKE, [upto, CHUNK])
            episodes = sorted({row[0] for row in cursor.fetchall()})
            if not episodes:
                break
            risks_keep(episodes)
            reread += len(episodes)
    if reread >= BULK:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE taskgen_episoderisks")


def kept_risk_arrays(run_id: int, config_id: int, verdict: str):
    """The run's episodes the config judged `verdict`, and the ones of them holding each risk, as int64 numpy
    arrays: (ids, {risk name: ids}), from one read of the kept bits (call after both refreshes)."""
    rows = EpisodeRisks.objects.filter(run_id=run_id, config_id=config_id, verdict=verdict).annotate(
        packed=F("episode_id") * (1 << _BITS) + F("risks"))
    packed = id_array(rows, "packed")
    ids, bits = packed >> _BITS, packed & ((1 << _BITS) - 1)
    return ids, {name: ids[(bits >> i) & 1 == 1] for i, name in enumerate(RISK_NAMES)}


# One index probe an episode, whatever the statistics say: asked as `episode_id = ANY(array)` or as a join to the
# ids, PostgreSQL costed a few thousand probes of the million-row table above reading all of it (5,166 episodes:
# 58 ms scanned, 7 ms probed); a LATERAL subquery with a LIMIT is not flattened into a join, so it stays a probe.
_KEPT_OF = """
SELECT wanted.id, kept.risks FROM unnest(%s::bigint[]) AS wanted(id)
CROSS JOIN LATERAL (SELECT risks FROM taskgen_episoderisks
                    WHERE episode_id = wanted.id AND config_id = %s LIMIT 1) AS kept
"""


def kept_risk_sets(episode_ids: list[int], config_id: int) -> tuple[dict[str, set[int]], list[int]]:
    """These episodes' kept risks for the config (one indexed read), and the ones with nothing kept: not judged by
    it, where the risks that need no judgment (no change) must still be read live (call after both refreshes)."""
    sets: dict[str, set[int]] = {name: set() for name in RISK_NAMES}
    with connection.cursor() as cursor:
        cursor.execute(_KEPT_OF, [ids_literal(episode_ids), config_id])
        kept = cursor.fetchall()
    by_bits: dict[int, list[int]] = {}  # a few dozen combinations of risks among thousands of episodes
    for episode, bits in kept:
        by_bits.setdefault(bits, []).append(episode)
    for bits, episodes in by_bits.items():
        for i, name in enumerate(RISK_NAMES):
            if bits >> i & 1:
                sets[name].update(episodes)
    found = {episode for episode, _ in kept}
    return sets, [pk for pk in episode_ids if pk not in found]
