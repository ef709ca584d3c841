"""The judge's evidence reads exactly as the reference builds it: filters, caps, line formats, screenshot order."""
from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from taskgen.models import Episode, Screenshot
from taskgen.stages.judge.evidence import (
    evidence_action_lines,
    evidence_change_lines,
    evidence_for_episode,
    evidence_request_lines,
    last_screen_text,
)
from tests.judge_helpers import (
    EXPECTED_ACTIONS,
    EXPECTED_CHANGES,
    EXPECTED_REQUESTS,
    add_screenshots,
    shop_episode,
)

REFERENCE = Path("/work/shared/reference/taskgen.py")
REAL_RUN = Path("/work/shared/data/online-mind2web-abp/run")


def test_request_lines_drop_static_admin_empty_params_and_csrf_and_keep_their_index(db):
    evidence = evidence_for_episode(episode=shop_episode())
    assert [line.text for line in evidence.request_lines] == EXPECTED_REQUESTS
    assert [line.index for line in evidence.request_lines] == [2, 3]


def test_change_and_action_lines_read_as_the_reference(db):
    evidence = evidence_for_episode(episode=shop_episode())
    assert [line.text for line in evidence.change_lines] == EXPECTED_CHANGES
    assert [line.text for line in evidence.action_lines] == EXPECTED_ACTIONS
    assert [line.index for line in evidence.action_lines] == [0, 1, 6]


def test_caps_keep_the_last_requests_the_first_changes_and_the_last_actions():
    log = [{"method": "GET", "path": f"/p/{i}", "query": {}, "status": 200} for i in range(70)]
    changes = [{"table": "t", "before": None, "after": {"id": i}, "changed": {"n": i}} for i in range(35)]
    actions = [{"click": {"index": i}} for i in range(50)]
    assert [line.index for line in evidence_request_lines(log)] == list(range(10, 70))
    assert [line.index for line in evidence_change_lines(changes)] == list(range(30))
    assert [line.index for line in evidence_action_lines(actions)] == list(range(10, 50))


def test_long_parameters_are_cut_as_the_reference_cuts_them():
    line = evidence_request_lines([{"method": "GET", "path": "/s", "query": {"q": "x" * 500}, "status": 200}])[0]
    assert line.text == "GET /s ?" + json.dumps({"q": "x" * 500})[:200] + " -> 200"


def test_answer_and_screen_text_are_cut_and_a_json_page_stays_json(db):
    episode = shop_episode(answer="a" * 2000, screen_text=["first", {"price": "12 €", "items": [1]}])
    evidence = evidence_for_episode(episode=episode)
    assert evidence.answer == "a" * 1500
    assert evidence.screen_text == '{"price": "12 €", "items": [1]}'
    assert last_screen_text([]) == ""
    assert evidence_for_episode(episode=shop_episode(answer="")).answer == "(none)"


def test_empty_evidence_reads_none(db):
    evidence = evidence_for_episode(episode=shop_episode(request_log=[], data_changes=[], actions=[]))
    assert (evidence.requests_text, evidence.changes_text, evidence.actions_text) == ("(none)",) * 3


def test_screenshots_are_the_start_then_the_end_with_the_final_last(db):
    episode = shop_episode()
    add_screenshots(episode, steps=12, size=(64, 40))
    names = [s.name for s in evidence_for_episode(episode=episode).screenshots]
    assert names == ["step_0.png", "step_1.png"] + [f"step_{i}.png" for i in range(5, 12)] + ["final.png"]


def test_a_short_episode_sends_every_screenshot_in_step_order(db):
    episode = shop_episode()
    add_screenshots(episode, steps=3, size=(64, 40))
    names = [s.name for s in evidence_for_episode(episode=episode).screenshots]
    assert names == ["step_0.png", "step_1.png", "step_2.png", "final.png"]


def test_screenshots_come_as_plain_values_with_their_blob_hash_and_type(db, django_assert_num_queries):
    episode = shop_episode()
    add_screenshots(episode, steps=2, size=(64, 40))
    rows = {s.name: s for s in Screenshot.objects.filter(episode=episode).select_related("blob")}
    episode = Episode.objects.select_related("task").get(pk=episode.pk)
    with django_assert_num_queries(1):  # the screenshots and their blobs' hashes in one query, no row read later
        shots = evidence_for_episode(episode=episode).screenshots
        values = [(s.name, s.step, s.kind, s.sha256, s.content_type) for s in shots]
    assert values == [(n, rows[n].step, rows[n].kind, rows[n].blob.sha256, rows[n].blob.content_type)
                      for n in ("step_0.png", "step_1.png", "final.png")]
    assert not any(isinstance(s, Screenshot) for s in shots)


def _reference_module():
    if not REFERENCE.exists():
        pytest.skip("the reference script is not on this machine")
    sys.modules.setdefault("helpers", types.ModuleType("helpers"))
    paths = types.ModuleType("helpers.paths")
    paths.REPO_ROOT = Path("/nonexistent")
    sys.modules.setdefault("helpers.paths", paths)
    spec = importlib.util.spec_from_file_location("reference_taskgen", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lines_match_the_reference_script_on_the_real_episodes():
    """Parity with the reference's own helpers over the 300 real episodes (runs where the shared data is present)."""
    ref = _reference_module()
    if not REAL_RUN.exists():
        pytest.skip("the online-mind2web data is not on this machine")
    from tests.judge_helpers import ACTIONS, DATA_CHANGES, REQUEST_LOG

    assert "\n".join(line.text for line in evidence_request_lines(REQUEST_LOG)) == ref._fmt_log(REQUEST_LOG)
    assert "\n".join(line.text for line in evidence_change_lines(DATA_CHANGES)) == ref._fmt_changes(DATA_CHANGES)
    assert [line.text for line in evidence_action_lines(ACTIONS)] == ref._fmt_actions(ACTIONS)
    checked = 0
    for path in sorted(REAL_RUN.glob("*/grade_inputs.json")):
        g = json.loads(path.read_text())
        assert [line.text for line in evidence_action_lines(g.get("actions"))] == ref._fmt_actions(g.get("actions"))
        assert last_screen_text(g.get("seen")) == ref._last_seen(g.get("seen"))
        checked += 1
    assert checked >= 300  # 301 tasks, 300 episode folders


def test_the_reviewer_sees_as_noise_exactly_the_requests_the_judge_was_not_shown(db):
    from review.workbench import requests
    from tests.factories import EpisodeFactory

    paths = ["/shop/", "/admin/orders", "/_admin/state", "/img/cart.gif", "/img/Photo.JPG", "/static/app.css",
             "/favicon.ico", "/shop/cart.png", "/checkout"]
    episode = EpisodeFactory(request_log=[{"method": "GET", "path": p, "query": {}, "body": None, "status": 200}
                                          for p in paths])
    shown_to_judge = {line.index for line in evidence_for_episode(episode=episode).request_lines}
    on_page = {r.index: r.is_noise for r in requests(episode)}
    assert {i for i, noise in on_page.items() if not noise} == shown_to_judge
    assert {paths[i] for i in shown_to_judge} >= {"/admin/orders", "/img/cart.gif", "/img/Photo.JPG"}
