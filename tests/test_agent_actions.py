"""Reading a model agent's answer into the run dir's one-key actions, and the checks that end an episode."""
from __future__ import annotations

import pytest

from taskgen.harness.agent_actions import AnswerUnreadable, action_check, parse_agent_answer
from taskgen.harness.agents import AgentStop
from taskgen.harness.model_agent import element_list
from taskgen.harness.observe import Observation

SHOP = {"task_id": "t", "site": "shop", "instruction": "find it"}


def _page(n: int = 3) -> Observation:
    elements = [{"index": i, "tag": "a", "role": "link", "name": "", "text": f"link {i}", "label": "",
                 "value": "", "selector": f'a[href="/sites/shop/{i}/"]', "options": []} for i in range(n)]
    return Observation(step=2, url="http://127.0.0.1:8000/sites/shop/", title="Shop", text="", elements=elements)


@pytest.mark.parametrize("text,action", [
    ('{"thought": "go", "action": {"click": {"element": 2}}}', {"click": {"index": 2}}),
    ('Sure!\n```json\n{"action": {"type": {"element": "1", "text": "mug", "submit": true}}}\n```',
     {"type": {"index": 1, "text": "mug", "submit": True}}),
    ('{"select": {"index": 0, "value": "express"}}', {"select": {"index": 0, "value": "express"}}),
    ('{"action": {"scroll": {"direction": "up"}}}', {"scroll": {"dy": -600}}),
    ('{"action": {"goto": {"path": "/sites/shop/cart/"}}}', {"goto": {"url": "/sites/shop/cart/"}}),
    ('{"action": {"back": null}}', {"back": {}}),
    ('{"action": {"answer": {"text": "€40.50"}}}', {"answer": {"text": "€40.50"}}),
    ('{"action": {"done": {}}}', {"done": {}}),
])
def test_each_action_is_read_into_the_recorded_shape(text, action):
    assert parse_agent_answer(text)[0] == action


def test_the_thought_is_kept_as_the_stated_thought():
    answer = parse_agent_answer('{"thought": "the cart is 3", "action": {"done": {}}}')
    assert (answer.thought, answer.thinking) == ("the cart is 3", "")


def test_a_think_block_is_the_reasoning_and_not_read_for_the_action():
    text = ('<think>The list shows {"click": {"element": 9}} style numbers; the search box is [1].</think>\n'
            '{"thought": "search first", "action": {"type": {"element": 1, "text": "mug", "submit": true}}}')
    answer = parse_agent_answer(text)
    assert answer.action == {"type": {"index": 1, "text": "mug", "submit": True}}
    assert answer.thinking.startswith("The list shows") and answer.thought == "search first"


def test_prose_with_braces_before_the_answer_is_skipped():
    text = 'I see a set {a, b} of links. Then: {"action": {"click": {"element": 4}}} and that is it.'
    assert parse_agent_answer(text)[0] == {"click": {"index": 4}}


@pytest.mark.parametrize("text,error", [
    ("I would click the cart", "not a JSON object"),
    ('{"action": {"click": {}, "done": {}}}', "exactly one key"),
    ('{"action": {"hover": {"element": 1}}}', "unknown action 'hover'"),
    ('{"action": {"click": {"element": "the blue one"}}}', "needs \"element\""),
    ('{"action": {"goto": {}}}', "goto needs \"path\""),
    ('{"action": {"click": 3}}', "must be an object"),
])
def test_an_unreadable_answer_says_what_is_wrong(text, error):
    with pytest.raises(AnswerUnreadable, match=error):
        parse_agent_answer(text)


def test_an_element_number_the_page_lacks_ends_the_episode():
    with pytest.raises(AgentStop) as stop:
        action_check({"click": {"index": 7}}, _page(3), SHOP)
    assert stop.value.finished == "bad_element" and "elements: 0 to 2" in stop.value.reason
    action_check({"click": {"index": 2}}, _page(3), SHOP)


@pytest.mark.parametrize("url,ok", [("/sites/shop/cart/", True), ("cart/", True), ("/sites/shop", True),
                                    ("/sites/mail/", False), ("/sites/shopping/", False),
                                    ("https://example.com/sites/shop/", False), ("//evil.test/", False)])
def test_goto_stays_on_the_tasks_site(url, ok):
    if ok:
        action_check({"goto": {"url": url}}, _page(), SHOP)
    else:
        with pytest.raises(AgentStop, match="leaves the site"):
            action_check({"goto": {"url": url}}, _page(), SHOP)


def test_the_element_list_is_capped_and_says_how_many_are_not_shown(settings):
    settings.AGENT_MAX_ELEMENTS, settings.AGENT_ELEMENT_CHARS = 2, 10
    page = _page(5)
    page.elements[0]["text"] = "a very long link name that goes on"
    lines = element_list(page.elements).splitlines()
    assert lines[0] == '[0] link "a very lo…" -> a[href="/sites/shop/0/"]'
    assert len(lines) == 3 and lines[2].startswith("(3 more elements")
