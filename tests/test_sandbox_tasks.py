"""The human tasks, their verifiers, the sitemaps, and the scripted agent's seeded mistakes."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from sandbox.catalog import TASKS_FILE, sandbox_tasks
from sandbox.sitemap import sitemaps_sync
from sandbox.verifiers import VerifierError, verifier_evaluate
from taskgen.harness.agents import SCRIPTED_NAME, ScriptedAgent, find_element
from taskgen.harness.observe import Observation
from taskgen.models import Site

REFERENCE_KEYS = {"kind", "task_id", "site", "sites", "macro", "macros", "instruction", "start_path", "task_kind",
                  "verifier"}


def test_the_catalogue_has_60_plus_human_tasks_of_one_to_three_parts_over_three_sites():
    tasks = sandbox_tasks()
    assert len(tasks) >= 60
    assert len({t["task_id"] for t in tasks}) == len(tasks)
    assert Counter(t["site"] for t in tasks).keys() == {"shop", "mail", "booking"}
    assert {t["task_kind"] for t in tasks} == {"info", "action"}
    for t in tasks:
        assert set(t) == REFERENCE_KEYS and t["kind"] == "human"
        assert 1 <= len(t["verifier"]["checks"]) <= 3
        assert t["verifier"]["solution"][-1] == {"done": {}}


def test_the_committed_tasks_file_is_the_catalogue():
    lines = [json.loads(x) for x in TASKS_FILE.read_text(encoding="utf-8").splitlines()]
    assert lines == sandbox_tasks()  # run `taskgen sandbox-tasks` after changing the catalogue or the seed


STATE = {"shop": {"orders": [{"id": 1, "name": "Zoë", "items": [{"product_id": 4, "qty": 2}], "shipping": "express"}]}}


@pytest.mark.parametrize(("check", "ok"), [
    ({"type": "row_exists", "site": "shop", "collection": "orders", "where": {"items": {"has": {"product_id": 4}}}},
     True),
    ({"type": "row_exists", "site": "shop", "collection": "orders", "where": {"items": {"has": {"product_id": 5}}}},
     False),
    ({"type": "row_exists", "site": "shop", "collection": "orders", "where": {"name": {"contains": "zoË"}}}, True),
    ({"type": "row_absent", "site": "shop", "collection": "orders", "where": {"shipping": "express"}}, False),
    ({"type": "answer_contains", "values": ["€12.50", "Crème"]}, True),
    ({"type": "answer_contains", "values": ["€13.50"]}, False),
    ({"type": "request_made", "method": "GET", "path": "/sites/shop/search/", "query": {"sort": "price_asc"}}, True),
    ({"type": "request_made", "method": "GET", "path": "/sites/shop/search/", "query": {"sort": "rating"}}, False),
])
def test_verifier_checks(check, ok):
    log = [{"method": "GET", "path": "/sites/shop/search/", "query": {"sort": "price_asc"}, "body": {}, "status": 200}]
    outcome = verifier_evaluate(verifier={"checks": [{"part": "p", **check}]}, state=STATE,
                                answer="The  crème costs €12.50", log=log)
    assert outcome.ok is ok and outcome.parts == [{"part": "p", "ok": ok}]


def test_a_malformed_verifier_is_a_clear_error():
    with pytest.raises(VerifierError, match="no checks"):
        verifier_evaluate(verifier={}, state={}, answer="", log=[])
    with pytest.raises(VerifierError, match="unknown verifier check type 'vibes'"):
        verifier_evaluate(verifier={"checks": [{"type": "vibes"}]}, state={}, answer="", log=[])


@pytest.mark.django_db
def test_sitemaps_are_generated_from_the_sites_and_stored_on_the_site_rows(tmp_path):
    maps = sitemaps_sync(out_dir=tmp_path)
    shop = Site.objects.get(slug="shop").sitemap
    assert shop == maps["shop"] == json.loads((tmp_path / "shop.json").read_text())
    assert shop["name"].startswith("Maison Épicerie")
    assert {"path": "/sites/shop/checkout/", "title": "Checkout — Maison Épicerie"} not in shop["pages"]  # POST-only
    assert any(p["path"].startswith("/sites/shop/product/") for p in shop["pages"])
    sort = next(c for c in shop["controls"] if c["name"] == "sort")
    assert sort["kind"] == "select" and sort["label"] == "Sort by" and {"text": "Customer rating", "value": "rating"} \
        in sort["options"]
    assert any(c["name"] == "subject" for c in maps["mail"]["controls"])
    assert any("calendar" in p["path"] for p in maps["booking"]["pages"])


def _obs(*elements: dict) -> Observation:
    base = {"tag": "a", "type": "", "name": "", "text": "", "label": "", "href": "", "options": []}
    return Observation(step=1, url="", title="", text="", elements=[{**base, "index": i, **e}
                                                                     for i, e in enumerate(elements)])


def test_find_element_does_not_take_an_inputs_value_for_a_links_text():
    obs = _obs({"tag": "input", "name": "q", "text": "Genmaicha"}, {"text": "Genmaicha"})
    assert find_element(obs.elements, {"text": "Genmaicha"})["index"] == 1
    assert find_element(obs.elements, {"name": "q"})["index"] == 0
    assert find_element(obs.elements, {"text": "Sencha"}) is None


def test_the_scripted_agent_is_named_a_simulation_and_follows_the_solution_without_mistakes():
    task = next(t for t in sandbox_tasks() if t["task_id"] == "sb-shop-001")
    agent = ScriptedAgent(mistake_rate=0.0)
    agent.start(task)
    assert agent.name == SCRIPTED_NAME and "simulation" in agent.name and agent.mistake is None
    obs = _obs({"tag": "input", "name": "q"}, {"text": "Kenyan AA Whole Beans"})
    assert agent.act(obs) == {"type": {"index": 0, "text": "Kenyan AA Whole Beans", "submit": True}}
    assert agent.act(obs) == {"click": {"index": 1}}
    assert next(iter(agent.act(obs))) == "answer"
    assert agent.act(obs) == {"done": {}}


def test_scripted_mistakes_are_seeded_and_at_about_the_set_rate():
    tasks = sandbox_tasks()

    def mistakes(seed: int) -> list:
        out = []
        for t in tasks:
            agent = ScriptedAgent(mistake_rate=0.3, seed=seed)
            agent.start(t)
            out.append(agent.mistake)
        return out

    assert mistakes(1) == mistakes(1)
    assert 8 <= sum(m is not None for m in mistakes(1)) <= 30
    assert {m for m in mistakes(1) + mistakes(2) if m} == {"skip_step", "wrong_value", "stop_early", "wrong_answer"}


@pytest.mark.parametrize(("target", "allowed"), [
    ("/sites/shop/", True), ("http://localhost:9/x", True), ("https://example.com/", False),
    ("//example.com/x", False), ("http://127.0.0.1.example.com/", False),
])
def test_the_harness_visits_only_loopback_addresses(target, allowed):
    from taskgen.harness.browser import HarnessError
    from taskgen.harness.episode import resolve_url

    if allowed:
        assert resolve_url("http://127.0.0.1:8123", target).startswith("http")
    else:
        with pytest.raises(HarnessError, match="only visits the sandbox"):
            resolve_url("http://127.0.0.1:8123", target)
