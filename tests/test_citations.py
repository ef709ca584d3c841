"""Every form of citation a judge writes links to the evidence it names; one that points at nothing is unsupported."""
from __future__ import annotations

import re

import pytest

from taskgen.citations import EvidenceIndex, citations_in, unsupported_count
from taskgen.judging import unsupported_citations_count
from tests.factories import EpisodeFactory, TaskFactory

LOG = [{"method": "GET", "path": "/sites/shop/", "status": 200},
       {"method": "GET", "path": "/static/app.css", "status": 200},
       {"method": "GET", "path": "/sites/shop/search", "query": {"q": "Brazil Santos Bourbon"}, "status": 200},
       {"method": "POST", "path": "/sites/shop/cart/add", "body": {"product": "12", "qty": "2"}, "status": 302},
       {"method": "GET", "path": "/sites/shop/cart", "status": 200}]
CHANGES = [{"collection": "cart_items", "op": "create", "after": {"id": 4, "name": "Brazil Santos Bourbon",
                                                                   "qty": 2}}]
ACTIONS = [{"type": {"index": 2, "text": "Brazil Santos Bourbon"}}, {"click": {"index": 8}}, {"done": {}}]


def _index(**overrides) -> EvidenceIndex:
    fields = {"request_log": LOG, "data_changes": CHANGES, "actions": ACTIONS, "answer": "Added two bags.",
              "screen_text": ["Cart: Brazil Santos Bourbon × 2"], "instruction": "Add two bags of Brazil Santos "
              "Bourbon to the cart, then open the 'Checkout' page", "step_files": {"step_1.png": 1, "step_2.png": 2,
                                                                                   "step_3.png": 3}}
    return EvidenceIndex.from_fields(**{**fields, **overrides})


def _one(text: str, **kwargs):
    [citation] = citations_in(text, _index(), **kwargs)
    return citation


@pytest.mark.parametrize("text, anchor", [
    ("in request #3", "req-3"), ("request 4 shows the cart", "req-4"), ("change #0", "chg-0"),
    ("see step 2", "step-2"), ("screenshot 3 shows the cart", "step-3"), ("step_1.png", "step-1"),
    ("action 1 typed it", "act-1"), ("POST /sites/shop/cart/add -> 302", "req-3"), ("the cart_items row", "chg-0"),
    ('typed "Brazil Santos Bourbon"', "req-2"), ("the final answer", "answer"), ("opened /shop/cart", "req-4"),
])
def test_every_form_a_judge_uses_links_to_what_it_names(text, anchor):
    citation = _one(text)
    assert (citation.anchor, citation.unsupported) == (anchor, False)


@pytest.mark.parametrize("text", ["request #12 added it", "change #3", "step 14", "step_9.png", "action 0"])
def test_a_number_past_what_was_recorded_is_unsupported_even_in_a_part_not_done(text):
    citation = _one(text, done=False)
    assert citation.anchor is None and citation.unsupported


def test_a_path_or_value_found_nowhere_is_unsupported_only_when_the_part_is_done():
    for text in ("POST /sites/shop/checkout/pay", '"Kenya AA" is in the cart'):
        assert _one(text, done=True).unsupported
        absent = _one(text, done=False)  # "no request to /checkout was made" is a fair thing to say
        assert absent.anchor is None and not absent.unsupported


def test_quoting_the_task_is_not_a_citation_and_requests_lists_link_each():
    assert citations_in("the task asks for the 'Checkout' page", _index()) == []
    assert [c.anchor for c in citations_in("requests #2 and #3", _index())] == ["req-2", "req-3"]


def test_the_rules_baselines_own_wording_links():
    text = "heuristic baseline (rules, not a model): 3/4 key words found (brazil, santos, bourbon) in request #2, " \
           "change #0, answer"
    assert [c.anchor for c in citations_in(text, _index())] == ["req-2", "chg-0", "answer"]


def test_unsupported_citations_are_counted_over_a_judgments_parts():
    parts = [{"part": "add", "done": True, "evidence": "request #12 and change #0"},
             {"part": "pay", "done": True, "evidence": "POST /sites/shop/checkout/pay"},
             {"part": "open", "done": False, "evidence": "no GET /sites/shop/checkout"}]
    assert unsupported_count(parts, _index()) == 2
    assert unsupported_count(parts, _index(request_log=[], data_changes=[])) == 3


@pytest.mark.django_db
def test_the_count_stored_with_a_judgment_reads_the_episode():
    episode = EpisodeFactory(request_log=LOG, data_changes=CHANGES, actions=ACTIONS,
                             task=TaskFactory(instruction="Add a bag"))
    parts = [{"part": "add", "done": True, "evidence": "request #12; step_1.png"}]
    assert unsupported_citations_count(episode_id=episode.pk, parts=parts) == 2  # no such request, no screenshots


def test_a_collection_named_that_no_data_change_touched_is_unsupported():
    for changes in ([], CHANGES):  # no data changes at all; changes of another collection only
        index = _index(data_changes=changes)
        for text in ("the orders collection has a new row", 'the "orders" table got a row', 'collection: "orders"'):
            [cited] = citations_in(text, index, done=True)
            assert (cited.kind, cited.anchor, cited.unsupported) == ("collection", None, True), text
            [not_done] = citations_in(text, index, done=False)
            assert not not_done.unsupported
        assert citations_in("no row was added to the orders collection", index) == []  # says it was left alone
    assert _one("a row in the cart_item table").anchor == "chg-0"  # singular or plural, the same collection
    assert citations_in("the data collection looks fine", _index()) == []
    parts = [{"part": "order", "done": True, "evidence": "the orders collection has a new row"}]
    assert unsupported_count(parts, _index(data_changes=[])) == 1


@pytest.mark.parametrize("text, anchors", [
    ("request #4 (GET /sites/shop/cart) shows the cart", ["req-4"]),
    ("step 2 (step_2.png) shows it", ["step-2"]),
    ("POST /sites/shop/cart/add and again /sites/shop/cart/add/", ["req-3"]),
    ("the cart_items row, change #0", ["chg-0"]),
    ('typed "Brazil Santos Bourbon" in request #2', ["req-2"]),
    ("request #12, then request #12 again", [None]),
])
def test_each_place_is_cited_once(text, anchors):
    assert [c.anchor for c in citations_in(text, _index())] == anchors


@pytest.mark.django_db
def test_the_page_numbers_judge_parts_from_one_like_steps(viewer_client):
    from tests.factories import JudgmentFactory

    judgment = JudgmentFactory(parts=[{"part": "find it", "done": True, "evidence": "request #0"},
                                      {"part": "report it", "done": False, "evidence": "no answer"}])
    page = viewer_client.get(judgment.episode.get_absolute_url()).content.decode()
    [parts_list] = re.findall(r'<ol class="parts"[^>]*>', page)
    assert re.search(r'\bstart="(\d+)"', parts_list) is None or 'start="1"' in parts_list


@pytest.mark.django_db
def test_the_migration_counts_stored_judgments_again_under_these_rules():
    import importlib

    from django.apps import apps

    from taskgen.models import Judgment
    from tests.factories import JudgmentFactory

    migration = importlib.import_module("taskgen.migrations.0013_recount_unsupported_citations")
    stale = JudgmentFactory(episode=EpisodeFactory(data_changes=[]), unsupported_citations=0,
                            parts=[{"part": "order", "done": True, "evidence": "the orders collection has a new row"}])
    right = JudgmentFactory(unsupported_citations=0, parts=[{"part": "x", "done": False, "evidence": "nothing"}])
    migration.recount_unsupported(apps, None)
    assert Judgment.objects.get(pk=stale.pk).unsupported_citations == 1
    assert Judgment.objects.get(pk=right.pk).unsupported_citations == 0
