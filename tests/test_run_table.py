"""A run page to triage: columns, filters, sort and search in the URL, saved as a queue, at a fixed query count."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from review.models import Queue
from review.services import label_set
from taskgen.models import FinalLabel, VerifierResult
from tests.factories import (
    EpisodeFactory,
    JudgeConfigFactory,
    JudgmentFactory,
    RunFactory,
    SiteFactory,
    TaskFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def run():
    """A judged run: two false positives, a true positive, a false negative, an unjudged episode."""
    run, config = RunFactory(name="sandbox-demo"), JudgeConfigFactory()
    shop, mail = SiteFactory(slug="shop"), SiteFactory(slug="mail")
    cases = [("sb-shop-017", shop, "action", "SUCCESS", False), ("sb-mail-003", mail, "action", "SUCCESS", False),
             ("sb-shop-001", shop, "info", "SUCCESS", True), ("sb-mail-009", mail, "info", "NOT SUCCESS", True),
             ("sb-shop-030", shop, "info", None, None)]
    for order, (task_id, site, kind, verdict, ok) in enumerate(cases):
        episode = EpisodeFactory(run=run, task_order=order, task=TaskFactory(
            task_id=task_id, site=site, task_kind=kind, instruction=f"Do {task_id} with Bourbon" if order == 0 else
            f"Do {task_id}"), request_log=[{"method": "GET", "path": "/sites/x/", "status": 200}], data_changes=[])
        if verdict:
            JudgmentFactory(episode=episode, config=config, verdict=verdict)
        if ok is not None:
            VerifierResult.objects.create(episode=episode, ok=ok, source="sandbox")
    return run


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-episode="\d+"><td class="num">\d+</td><td><a href="[^"]+">([^<]+)</a>', html)


def test_judge_success_and_verifier_fail_shows_the_false_positives_with_their_reasons(viewer_client, run):
    html = viewer_client.get(run.get_absolute_url(), {"verdicts": "SUCCESS", "verifier": "fail"}).content.decode()
    assert _rows(html) == ["sb-shop-017", "sb-mail-003"]
    assert "<strong>2</strong> of 5 episodes: judge said SUCCESS · verifier failed" in html
    assert html.count("false positive (verifier)") == 2
    assert "an action task whose session changed no data; the verifier says otherwise" in html


@pytest.mark.parametrize("query, expected", [
    ({"sort": "verdict"}, ["sb-mail-009", "sb-shop-017", "sb-mail-003", "sb-shop-001", "sb-shop-030"]),
    ({"sort": "-task"}, ["sb-shop-030", "sb-shop-017", "sb-shop-001", "sb-mail-009", "sb-mail-003"]),
    ({"sort": "agreement"}, ["sb-shop-017", "sb-mail-003", "sb-mail-009", "sb-shop-001", "sb-shop-030"]),
    ({"sites": "mail", "task_kind": "info"}, ["sb-mail-009"]),
    ({"search": "bourbon"}, ["sb-shop-017"]), ({"verdicts": "UNJUDGED"}, ["sb-shop-030"]),
    ({"disagree": "1"}, ["sb-shop-017", "sb-mail-003", "sb-mail-009"]),
])
def test_filters_search_and_sort_come_from_the_url(viewer_client, run, query, expected):
    assert _rows(viewer_client.get(run.get_absolute_url(), query).content.decode()) == expected


def test_label_state_and_the_final_label_column(viewer_client, run):
    episode = run.episodes.get(task__task_id="sb-shop-001")
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="NOT SUCCESS")
    html = viewer_client.get(run.get_absolute_url(), {"label_state": "final-not-success"}).content.decode()
    assert _rows(html) == ["sb-shop-001"] and "false positive (final label)" in html


@pytest.mark.parametrize("query, expected", [
    ({"label_state": "unlabelled", "task_kind": "action", "sort": "-final"}, ["sb-mail-003"]),
    ({"label_state": "unlabelled", "sort": "-final"}, ["sb-shop-030", "sb-mail-009", "sb-mail-003"]),
    ({"label_state": "unlabelled", "sort": "final"}, ["sb-mail-003", "sb-mail-009", "sb-shop-030"]),
    ({"label_state": "unlabelled", "sort": "-verdict"}, ["sb-mail-003", "sb-mail-009", "sb-shop-030"]),
    ({"label_state": "labelled", "sort": "-final"}, ["sb-shop-001", "sb-shop-017"]),
    ({"label_state": "labelled", "task_kind": "action", "sort": "final"}, ["sb-shop-017"]),
])
def test_labelled_or_not_filters_and_sorts_by_the_final_label(viewer_client, run, query, expected):
    """An episode whose reviewers disagree is labelled with no final label yet; the unlabelled ones have none."""
    label_set(episode=run.episodes.get(task__task_id="sb-shop-001"), reviewer=UserFactory(role="reviewer"),
              verdict="SUCCESS")
    for verdict in ("SUCCESS", "NOT SUCCESS"):
        label_set(episode=run.episodes.get(task__task_id="sb-shop-017"), reviewer=UserFactory(role="reviewer"),
                  verdict=verdict)
    html = viewer_client.get(run.get_absolute_url(), query).content.decode()
    assert _rows(html) == expected and f"<strong>{len(expected)}</strong> of 5 episodes" in html


def test_an_unknown_filter_value_is_said_and_nothing_is_hidden(viewer_client, run):
    html = viewer_client.get(run.get_absolute_url(), {"sites": "atlantis"}).content.decode()
    assert "no site atlantis" in html and len(_rows(html)) == 5


def test_the_view_is_saved_as_a_queue_with_the_same_episodes(reviewer_client, run):
    page = reviewer_client.get(run.get_absolute_url(), {"verdicts": "SUCCESS", "verifier": "fail"}).content.decode()
    assert 'name="verifier" value="fail"' in page
    response = reviewer_client.post(reverse("review:queue_create"), {
        "name": "fps", "kind": "false-positive", "runs": run.pk, "verdicts": "SUCCESS", "verifier": "fail",
        "task_kind": "", "label_state": "", "search": ""})
    queue = Queue.objects.get(name="fps")
    assert response["Location"] == queue.get_absolute_url()
    html = reviewer_client.get(queue.get_absolute_url()).content.decode()
    assert "run sandbox-demo · judge said SUCCESS · verifier failed" in html
    assert "sb-shop-017" in html and "sb-mail-003" in html and "sb-shop-001" not in html


@pytest.mark.parametrize("size", [3, 30])
def test_the_run_page_makes_a_fixed_number_of_queries(viewer_client, django_assert_max_num_queries, size):
    run, config = RunFactory(), JudgeConfigFactory()
    for _ in range(size):
        JudgmentFactory(episode=EpisodeFactory(run=run), config=config)
    # 20: on PostgreSQL the counts come from validate's summary, brought up to date first (a few queries, as many
    # for a handful of changed episodes as for thousands)
    with django_assert_max_num_queries(24):
        viewer_client.get(run.get_absolute_url(), {"sort": "-verdict", "verifier": "none", "unsupported": "1"})


def test_an_unjudged_run_sorts_and_filters_without_a_config(viewer_client):
    run = RunFactory()
    EpisodeFactory(run=run, task=TaskFactory(task_id="only-one"))
    for query in ({"sort": "-verdict"}, {"sort": "agreement", "verdicts": "UNJUDGED", "disagree": "1"}):
        response = viewer_client.get(run.get_absolute_url(), query)
        assert response.status_code == 200
    assert _rows(viewer_client.get(run.get_absolute_url(), {"verdicts": "UNJUDGED"}).content.decode()) == ["only-one"]


def _headings(html: str) -> list[str]:
    head = re.search(r"<thead>(.*?)</thead>", html, re.S).group(1)
    return [re.sub(r"<[^>]+>|[▲▼]", "", cell).strip() for cell in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]


def test_every_column_shown_sorts_by_what_it_shows(viewer_client, run):
    """Instruction, Screens and Flags fell back to "sorted by line" without a word."""
    for n, task_id in ((3, "sb-mail-003"), (1, "sb-shop-001"), (2, "sb-shop-030")):
        run.episodes.filter(task__task_id=task_id).update(screens=n)  # as the import counts them
    html = viewer_client.get(run.get_absolute_url()).content.decode()
    headings = _headings(html)
    links = re.findall(r'data-sort="(\w+)"', html)
    assert len(links) == len(headings) and "Instruction" in headings and "Screens" in headings and "Flags" in headings
    by = {key: _rows(viewer_client.get(run.get_absolute_url(), {"sort": key}).content.decode()) for key in links}
    assert by["instruction"] == ["sb-mail-003", "sb-mail-009", "sb-shop-001", "sb-shop-017", "sb-shop-030"]
    assert by["screens"] == ["sb-shop-017", "sb-mail-009", "sb-shop-001", "sb-shop-030", "sb-mail-003"]
    # riskiest first: the verdict's own parts, unsupported citations, an action task that changed no data, a judge
    # another says otherwise of, then the rest (taskgen/triage/risk.py)
    assert by["flags"] == ["sb-shop-017", "sb-mail-003", "sb-mail-009", "sb-shop-001", "sb-shop-030"]
    descending = viewer_client.get(run.get_absolute_url(), {"sort": "-screens"}).content.decode()
    assert _rows(descending)[0] == "sb-mail-003" and "sorted by screens (descending)" in descending
    by_instruction = viewer_client.get(run.get_absolute_url(), {"sort": "instruction"}).content.decode()
    assert "sorted by instruction" in by_instruction


def test_an_unknown_sort_is_refused_with_a_message(viewer_client, run):
    html = viewer_client.get(run.get_absolute_url(), {"sort": "-colour"}).content.decode()
    assert "unknown sort &#x27;colour&#x27;: use one of line, task, site" in html and "sorted by line" in html
    assert len(_rows(html)) == 5


@pytest.mark.parametrize("size", [3, 30])
@pytest.mark.parametrize("sort", ["instruction", "-screens", "flags"])
def test_the_new_sorts_make_a_fixed_number_of_queries(viewer_client, django_assert_max_num_queries, size, sort):
    run, config = RunFactory(), JudgeConfigFactory()
    for _ in range(size):
        JudgmentFactory(episode=EpisodeFactory(run=run), config=config)
    # flags read the risk tiers in turn until the page is full: at most five more on a page that holds them all
    with django_assert_max_num_queries(24 + 4 if sort == "flags" else 24):
        viewer_client.get(run.get_absolute_url(), {"sort": sort, "verdicts": "SUCCESS"})


def _cells(html: str, task_id: str) -> dict[str, str]:
    row = re.search(rf'<tr data-episode="\d+">(?:(?!</tr>).)*>{task_id}</a>.*?</tr>', html, re.S).group(0)
    return dict(re.findall(r'<td class="(ended|verdict|verifier|final|agreement|flags)"(.*?)</td>', row, re.S))


def test_a_row_says_how_its_episode_ended_why_the_verifier_failed_and_who_decided(viewer_client):
    """Each cell's words, escaped and cut as the table shows them (the rows are plain values put in words once)."""
    run, config = RunFactory(), JudgeConfigFactory()
    why = "the cart holds 2 × <b>Cold Brew</b> " + "and more " * 12
    failed = EpisodeFactory(run=run, task=TaskFactory(task_id="t-failed"), status="failed", finished="error",
                            end_step=0, end_reason="Error: <net> " + "x" * 400)
    JudgmentFactory(episode=failed, config=config, verdict="NONE")
    VerifierResult.objects.create(episode=failed, ok=False, source="sandbox",
                                  detail={"parts": [{"part": why, "ok": False}]})
    decided = EpisodeFactory(run=run, task=TaskFactory(task_id="t-decided"), finished="done", end_step=4)
    JudgmentFactory(episode=decided, config=config, verdict="SUCCESS")
    VerifierResult.objects.create(episode=decided, ok=True, source="sandbox")
    FinalLabel.objects.create(episode=decided, verdict="NOT SUCCESS", adjudicated=True)
    EpisodeFactory(run=run, task=TaskFactory(task_id="t-bare"))
    html = viewer_client.get(run.get_absolute_url()).content.decode()
    reason = f"failed “{why}”"
    assert _cells(html, "t-failed") == {
        "ended": f' title="Error: &lt;net&gt; {"x" * 286}…"><span class="pill bad">failed before the first step</span>',
        "verdict": '><span class="pill none">no verdict</span>',
        "verifier": f'><span class="pill bad">fail</span> <small class="verifier-reason" title="{escape(reason)}">'
                    f'{escape(reason[:79])}…</small>',
        "final": ">—", "agreement": '><span class="muted">—</span>', "flags": ">"}
    assert _cells(html, "t-decided") == {
        "ended": ">done at step 4", "verdict": '><span class="pill ok">SUCCESS</span>',
        "verifier": '><span class="pill ok">pass</span>',
        "final": '>Not success <span class="muted">(adjudicated)</span>',
        "agreement": '><span class="pill bad">false positive (final label)</span>', "flags": ">"}
    assert _cells(html, "t-bare") == {
        "ended": '><span class="muted">—</span>', "verdict": '><span class="muted">not judged</span>',
        "verifier": ">—", "final": ">—", "agreement": '><span class="muted">—</span>', "flags": ">"}


@pytest.mark.parametrize("text", ["", "Find item 42", "x" * 110, "x" * 111, "e\u0301" * 60, "e\u0301" * 100,
                                  "\u212b ring", "a\u0308" * 109 + "b"])
def test_a_cell_is_cut_as_the_templates_truncatechars_cuts_it(text):
    from django.utils.text import Truncator

    from review.run_table import _cut

    assert _cut(text, 110) == Truncator(text).chars(110)


def _rows_query(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries
            if 'ORDER BY' in q["sql"] and 'LIMIT' in q["sql"] and 'LIKE' in q["sql"] and 'COUNT' not in q["sql"]]


def test_a_search_with_few_matches_sorts_them_rather_than_walking_the_run(viewer_client, run, monkeypatch):
    """The matches are counted first (exact), and a page of few of them is read by the search and sorted: ordered on
    expressions no index holds, so PostgreSQL cannot walk a million episodes in line order testing each one (it did
    for 'item 4242' when ANALYZE's random sample overrated the words: a second a page). Many matches keep the walk,
    which finds a page of them at once. The rows are the same either way."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import review.run_table as run_table

    with CaptureQueriesContext(connection) as few:
        html = viewer_client.get(run.get_absolute_url(), {"search": "sb-"}).content.decode()
    assert _rows(html) == ["sb-shop-017", "sb-mail-003", "sb-shop-001", "sb-mail-009", "sb-shop-030"]
    assert [sql for sql in _rows_query(few) if '"task_order" + 0' in sql] == _rows_query(few) != []
    monkeypatch.setattr(run_table, "SMALL_GROUP", 4)  # five matches are many now
    with CaptureQueriesContext(connection) as many:
        walked = viewer_client.get(run.get_absolute_url(), {"search": "sb-"}).content.decode()
    assert _rows(walked) == _rows(html)
    assert _rows_query(many) and not [sql for sql in _rows_query(many) if '"task_order" + 0' in sql]
    descending = viewer_client.get(run.get_absolute_url(), {"search": "sb-", "sort": "-line"}).content.decode()
    assert _rows(descending) == _rows(html)[::-1]


@pytest.mark.parametrize("sort", ["steps", "-steps", "screens", "-screens", "kind", "-kind", "ended", "-ended"])
def test_a_search_with_few_matches_sorted_by_an_indexed_column_is_not_walked_on_its_index(viewer_client, run,
                                                                                          monkeypatch, sort):
    """Steps, screens, kind and ending each have an index of the run in that column's order, which PostgreSQL could
    walk testing every episode against the search as it could the line order: few matches are sorted on the column
    as no index holds it. The rows are those of the walked sort, in the same order."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import review.run_table as run_table

    column = {"steps": "steps", "screens": "screens", "kind": "task_kind", "ended": "finished"}[sort.lstrip("-")]
    with CaptureQueriesContext(connection) as few:
        html = viewer_client.get(run.get_absolute_url(), {"search": "sb-", "sort": sort}).content.decode()
    order_by = [sql.rpartition("ORDER BY")[2] for sql in _rows_query(few)]
    assert order_by and all(o.index(f'"{column}"') < o.index('"task_order" + 0') for o in order_by), order_by
    assert not [o for o in order_by if re.match(rf'\s*"taskgen_episode"\."{column}" (ASC|DESC)', o)], order_by
    monkeypatch.setattr(run_table, "SMALL_GROUP", 4)  # five matches are many now: the column's index may be walked
    walked = viewer_client.get(run.get_absolute_url(), {"search": "sb-", "sort": sort}).content.decode()
    assert len(_rows(html)) == 5 and _rows(walked) == _rows(html)
