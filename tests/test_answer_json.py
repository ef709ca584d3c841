"""Reading JSON out of a model's answer has one home (taskgen/providers/answer_json.py) for the judge, the proposer
and the agent. There were three copies, and two AnswerUnreadable classes, and they drifted: the proposer read only a
bare JSON text (a fenced answer, or one after a sentence, kept no task), the judge took the text from its first {
to its last } (two objects, or a <think> block holding braces, left it without a verdict), and only the agent left a
<think> block out. Each answer below is read the same way by all three."""
from __future__ import annotations

import json

import pytest

from taskgen.harness import agent_actions
from taskgen.judging import parse_judge_response
from taskgen.providers.answer_json import AnswerUnreadable, answer_json
from taskgen.stages.propose import keep

JUDGED = {"verdict": "SUCCESS", "parts": [{"part": "find the price", "done": True, "evidence": "step 3"}]}
PROPOSED = {"tasks": [{"instruction": "Find the price of the Kenyan AA Whole Beans", "kind": "info"}]}
ACTED = {"thought": "search first", "action": {"click": {"element": 4}}}


def _wrapped(value: dict) -> dict[str, str]:
    """One answer written the ways models write it."""
    text = json.dumps(value, ensure_ascii=False)
    return {
        "bare": text,
        "fenced": f"Here it is:\n```json\n{text}\n```\nHope that helps.",
        "after prose with braces": f"The page lists {{a, b}} links. My answer: {text} (that is all)",
        "after a think block with braces": f'<think>Maybe {{"verdict": "NOT SUCCESS"}}? No.</think>\n{text}',
        "after another object": f'{{"note": "first a remark"}} and then {text}',
    }


@pytest.mark.parametrize("shape", list(_wrapped(JUDGED)))
def test_the_judge_the_proposer_and_the_agent_read_every_shape_alike(shape):
    assert parse_judge_response(_wrapped(JUDGED)[shape]).verdict == "SUCCESS"
    assert keep.answer_items(_wrapped(PROPOSED)[shape]) == PROPOSED["tasks"]
    assert agent_actions.parse_agent_answer(_wrapped(ACTED)[shape]).action == {"click": {"index": 4}}


def test_the_proposers_bare_list_is_read_and_the_others_want_an_object():
    assert keep.answer_items('Sure: [{"instruction": "x"}]') == [{"instruction": "x"}]
    with pytest.raises(AnswerUnreadable, match="not a JSON object"):
        answer_json("[1, 2]")


@pytest.mark.parametrize("text", ["I think it worked.", "", "<think>{\"verdict\": \"SUCCESS\"}</think>"])
def test_an_answer_without_json_is_unreadable_to_all_three(text):
    assert parse_judge_response(text).verdict == "NONE"
    with pytest.raises(AnswerUnreadable, match="the answer is not JSON"):
        keep.answer_items(text)
    with pytest.raises(AnswerUnreadable, match="not a JSON object"):
        agent_actions.parse_agent_answer(text)


def test_one_class_says_an_answer_is_unreadable():
    assert keep.AnswerUnreadable is agent_actions.AnswerUnreadable is AnswerUnreadable
