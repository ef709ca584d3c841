"""The run table at a million episodes reads its counts from validate's summary and its sorted pages group by group
(review/run_table_groups.py): every page of every sort, either way, filtered or not, must be the page one plain sort
of the filtered rows gives, and every count the live count. PostgreSQL only: elsewhere there is no summary and the
table is that one plain sort."""
from __future__ import annotations

import random

import pytest
from django.db import connection

from review.run_table import SORTS, Sort, TableRows, run_table_filtered, run_table_order
from review.run_table_groups import SMALL_GROUP
from taskgen.models import FinalLabel, Label, VerifierResult
from taskgen.triage.filters import EpisodeFilter, episode_filter_parse
from tests.factories import (
    EpisodeFactory,
    JudgeConfigFactory,
    JudgmentFactory,
    RunFactory,
    SiteFactory,
    TaskFactory,
    UserFactory,
)

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="the summary is kept on PostgreSQL")]

FILTERS = [{}, {"verdicts": "SUCCESS"}, {"verdicts": "UNJUDGED,NONE"}, {"verifier": "fail"}, {"verifier": "none"},
           {"disagree": "1"}, {"sites": "beta"}, {"task_kind": "info", "verdicts": "NOT SUCCESS"},
           {"label_state": "final-success"}, {"label_state": "final-not-success", "verifier": "pass"},
           {"label_state": "unlabelled", "task_kind": "action"}, {"label_state": "unlabelled", "verdicts": "SUCCESS"},
           {"search": "item 1"}, {"unsupported": "1"}, {"label_state": "unlabelled"}, {"label_state": "labelled"}]


@pytest.fixture
def table():
    """A run of 70 episodes on three sites, judged by one config except a few, with verifier results, labels and
    final labels at random (each on its own, so an episode may have one without the other), and an episode of
    another run that must never show."""
    rng = random.Random(26)
    run, config = RunFactory(name="groups"), JudgeConfigFactory()
    reviewers = [UserFactory(role="reviewer") for _ in range(2)]
    sites = [SiteFactory(slug=slug) for slug in ("gamma", "alpha", "beta")]
    for n in range(70):
        site = sites[rng.randrange(3)]
        episode = EpisodeFactory(run=run, site=site, task_order=rng.randrange(40), steps=rng.randrange(4),
                                 screens=rng.randrange(3), finished=rng.choice(["", "answered", "step_limit"]),
                                 task_kind=rng.choice(["info", "action"]), data_changes=[],
                                 request_log=[{"method": "GET", "path": "/", "status": 200}] if n % 2 else [],
                                 task=TaskFactory(site=site, instruction=f"Find item {rng.randrange(30)}"))
        if rng.random() < 0.9:
            JudgmentFactory(episode=episode, config=config, verdict=rng.choice(["SUCCESS", "NOT SUCCESS", "NONE"]),
                            inconsistent=rng.random() < 0.1, unsupported_citations=int(rng.random() < 0.1))
        if rng.random() < 0.6:
            VerifierResult.objects.create(episode=episode, ok=rng.random() < 0.5, source="results.jsonl")
        if rng.random() < 0.4:
            FinalLabel.objects.create(episode=episode, verdict=rng.choice(["SUCCESS", "NOT SUCCESS", "UNSURE"]))
        for reviewer in reviewers[:rng.choice([0, 0, 1, 2])]:
            Label.objects.create(episode=episode, reviewer=reviewer, verdict=rng.choice(["SUCCESS", "NOT SUCCESS"]))
    JudgmentFactory(episode=EpisodeFactory(), config=config, verdict="SUCCESS")
    return run, config


def _filter(query: dict, config_id: int) -> EpisodeFilter:
    return episode_filter_parse(query, config_id=config_id)


@pytest.mark.parametrize("query", FILTERS)
def test_the_counts_from_the_summary_are_the_live_counts(table, query):
    run, config = table
    f = _filter(query, config.pk)
    rows = TableRows(run=run, f=f, sort=Sort("line", False))
    assert rows.count == run_table_filtered(run=run, f=f).count()
    assert rows.total == run.episodes.count() == 70


@pytest.mark.parametrize("query", FILTERS[:12])
@pytest.mark.parametrize("key", list(SORTS))
def test_every_page_of_every_sort_is_the_plain_sorts_page(table, key, query):
    run, config = table
    f = _filter(query, config.pk)
    for descending in (False, True):
        sort = Sort(key, descending)
        plain = list(run_table_order(run=run, f=f, sort=sort))
        rows = TableRows(run=run, f=f, sort=sort)
        pages = [rows[start:start + 7] for start in range(0, len(plain) + 7, 7)]
        assert [pk for page in pages for pk in page] == plain, (key, descending)


def test_a_small_group_of_final_labels_at_the_far_end_of_the_run_is_read_from_its_table(table, monkeypatch):
    """The labels of the bench's million episodes sat at its start: walking the run backwards for them read 960,000
    episodes (880 ms); a group this small is read from the final labels and sorted."""
    run, config = table
    f = EpisodeFilter(config_id=config.pk)
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        page = TableRows(run=run, f=f, sort=Sort("final", True))[0:5]
    read = [q["sql"] for q in captured.captured_queries if '"review_finallabel"."verdict" =' in q["sql"]]
    assert read and all('"task_order" + 0' in sql for sql in read) and SMALL_GROUP > 70
    assert page == list(run_table_order(run=run, f=f, sort=Sort("final", True))[:5])


def test_the_unlabelled_count_starts_from_the_labels_not_the_runs_episodes(table):
    """At a million episodes, 2% labelled, counting the unlabelled action episodes one by one took 300 ms: the count
    is the summary's cells less the labelled episodes' (a count of the labels)."""
    run, config = table
    f = _filter({"label_state": "unlabelled", "task_kind": "action"}, config.pk)
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        count = TableRows(run=run, f=f, sort=Sort("final", True)).count
    assert count == run_table_filtered(run=run, f=f).count() > 0
    assert not [q["sql"] for q in captured.captured_queries if '"__count"' in q["sql"]]
