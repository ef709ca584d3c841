"""Each judgment's risks kept beside validate's summary (taskgen/triage/risks_kept.py) against the risks read live
(taskgen/triage/risk.py: risk_id_arrays), on PostgreSQL where the summary's triggers keep them: after every kind of
write a risk reads (a judgment of either config, its flags, the verifier, the episode's evidence and run), the kept
bits give exactly the live sets; the certify design over a run's judged successes reads them."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from taskgen.models import Episode, Judgment, VerifierResult
from taskgen.stages.validate.summary import summary_available, validate_summary_refresh
from taskgen.triage.risk import RISK_NAMES, risk_id_arrays
from taskgen.triage.risks_kept import kept_risk_arrays, kept_risk_sets, risks_refresh
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, TaskFactory

pytestmark = pytest.mark.django_db
YES, NO = Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS
REQUESTS = [{"method": "POST", "path": "/cart", "status": 200}]


@pytest.fixture(autouse=True)
def _kept_only_on_postgresql():
    if not summary_available():
        pytest.skip("the risks are kept beside validate's summary, on PostgreSQL only")


def _live(run, config, verdict) -> tuple[list[int], dict[str, list[int]]]:
    judged = Judgment.objects.filter(episode__run=run, config=config, verdict=verdict)
    sets = risk_id_arrays(Episode.objects.filter(pk__in=judged.values("episode_id")), config.pk)
    return sorted(judged.values_list("episode_id", flat=True)), {name: sorted(sets[name]) for name in RISK_NAMES}


def _kept(run, config, verdict) -> tuple[list[int], dict[str, list[int]]]:
    validate_summary_refresh()
    risks_refresh()
    ids, sets = kept_risk_arrays(run.pk, config.pk, verdict)
    return sorted(ids.tolist()), {name: sorted(sets[name].tolist()) for name in RISK_NAMES}


def _episode(run, kind: str = "info", **evidence) -> Episode:
    return EpisodeFactory(run=run, task=TaskFactory(task_kind=kind), **evidence)


def _every_risk(run, a, b) -> dict[str, Episode]:
    """One episode holding each risk for config a (judged a success by it), and one holding none."""
    made = {"no_change": _episode(run, "action", request_log=REQUESTS, data_changes=[]),
            "inconsistent": _episode(run), "unsupported": _episode(run), "judges_disagree": _episode(run),
            "verifier_disagrees": _episode(run), "rest": _episode(run)}
    for name, episode in made.items():
        JudgmentFactory(episode=episode, config=a, verdict=YES, inconsistent=name == "inconsistent",
                        unsupported_citations=2 if name == "unsupported" else 0)
    JudgmentFactory(episode=made["judges_disagree"], config=b, verdict=NO)
    VerifierResult.objects.create(episode=made["verifier_disagrees"], ok=False, source="results.jsonl")
    return made


def assert_kept_is_live(run, configs) -> None:
    for config in configs:
        for verdict in (YES, NO):
            assert _kept(run, config, verdict) == _live(run, config, verdict), (config.pk, verdict)


def test_each_risk_is_kept_as_the_live_read_finds_it():
    run = RunFactory()
    a, b = JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")
    made = _every_risk(run, a, b)
    ids, sets = _kept(run, a, YES)
    assert ids == sorted(e.pk for e in made.values())
    for name in RISK_NAMES:
        assert sets[name] == [made[name].pk], name
    assert _kept(run, b, NO)[1]["judges_disagree"] == [made["judges_disagree"].pk]
    assert_kept_is_live(run, [a, b])


def test_every_write_a_risk_reads_re_reads_the_kept_bits():
    run, elsewhere = RunFactory(), RunFactory()
    a, b = JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")
    made = _every_risk(run, a, b)
    validate_summary_refresh()
    Episode.objects.filter(pk=made["no_change"].pk).update(data_changes=[{"table": "cart", "op": "insert"}])
    Judgment.objects.filter(episode=made["inconsistent"], config=a).update(inconsistent=False)
    Judgment.objects.filter(episode=made["judges_disagree"], config=b).delete()
    JudgmentFactory(episode=made["rest"], config=b, verdict=NO)  # a second opinion arrives
    VerifierResult.objects.filter(episode=made["verifier_disagrees"]).update(ok=True)
    Episode.objects.filter(pk=made["unsupported"].pk).update(run=elsewhere)
    ids, sets = _kept(run, a, YES)
    assert made["unsupported"].pk not in ids
    assert sets["no_change"] == sets["inconsistent"] == sets["verifier_disagrees"] == []
    assert sets["judges_disagree"] == [made["rest"].pk]
    assert_kept_is_live(run, [a, b])
    assert_kept_is_live(elsewhere, [a, b])
    Episode.objects.filter(pk=made["rest"].pk).delete()
    assert_kept_is_live(run, [a, b])


def test_a_chunk_reads_kept_risks_and_the_unjudged_live():
    from taskgen.stages.export.order import chunk_risk_sets
    from taskgen.triage.risk import risk_sets

    run = RunFactory()
    a, b = JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")
    made = _every_risk(run, a, b)
    unjudged = _episode(run, "action", request_log=REQUESTS, data_changes=[])  # no change, judged by nobody
    ids = [e.pk for e in made.values()] + [unjudged.pk]
    for config in (a, b):
        live = risk_sets(Episode.objects.filter(pk__in=ids), config.pk, correlated=True)
        assert chunk_risk_sets(ids, config.pk) == live, config.pk
    assert unjudged.pk in chunk_risk_sets(ids, a.pk)["no_change"]


@pytest.mark.parametrize("which", ["a", "b", "any"])
def test_risk_reasons_read_with_its_sql_kept_as_the_orm_reads_them(which):
    from taskgen.triage import risk

    run = RunFactory()
    a, b = JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")
    made = _every_risk(run, a, b)
    VerifierResult.objects.create(episode=made["rest"], ok=True, source="results.jsonl", detail={"checks": ["x"]})
    config_id = {"a": a.pk, "b": b.pk, "any": None}[which]
    ids = sorted(e.pk for e in made.values())
    for some in (ids, ids[:2], ids[3:], []):  # the second call on reads the SQL built by the first
        kept = sorted(risk._reasons_read(some, config_id), key=lambda row: row["pk"])
        built = sorted(risk._reasons_query(Q(pk__in=some), config_id), key=lambda row: row["pk"])
        assert kept == built
    assert risk.risk_reasons(ids, a.pk)[made["unsupported"].pk] == [
        "the judge cites evidence that is not there (2 citations)"]


def test_a_few_thousand_episodes_kept_risks_are_read_through_the_index_of_a_large_table():
    """A certificate reads the kept risks of a few thousand episodes out of a table of a row per judgment (a million
    at the bench's scale): as `= ANY(array)`, or joined to the ids, PostgreSQL costed the lookups above a sequential
    scan of the whole table (58 ms against 7 ms at a million rows)."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO taskgen_episoderisks (episode_id, run_id, config_id, verdict, risks) "
                       "SELECT g, 1, 1, 'SUCCESS', 0 FROM generate_series(1, 300000) AS g")
        cursor.execute("ANALYZE taskgen_episoderisks")
    wanted = list(range(1, 300_000, 60))  # 5,000 episodes
    with CaptureQueriesContext(connection) as seen:
        sets, unkept = kept_risk_sets(wanted, 1)
    assert unkept == [] and all(not members for members in sets.values())
    sql = next(q["sql"] for q in seen.captured_queries if "taskgen_episoderisks" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan on taskgen_episoderisks" not in plan, plan
