"""A model agent's answer read into one of the run dir's one-key actions, and the checks that end an episode.

The model answers {"thought": "...", "action": {NAME: PARAMS}} and names elements by number ("element", or "index");
the action recorded is the harness's own: {"click": {"index": 7}}, {"type": {"index": 2, "text": "..", "submit":
true}}, {"select": {"index": 4, "value": ".."}}, {"scroll": {"dy": 600}}, {"goto": {"url": "/sites/.."}},
{"back": {}}, {"answer": {"text": ".."}}, {"done": {}}.
"""
from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

from taskgen.harness.agent_errors import AgentStop
from taskgen.harness.observe import Observation
from taskgen.providers.answer_json import AnswerUnreadable, answer_json, thinking_of

ACTIONS = ("click", "type", "select", "scroll", "goto", "back", "answer", "done")
BY_ELEMENT = ("click", "type", "select")
SCROLL_PIXELS = 600


def _is_answer(value) -> bool:
    return isinstance(value, dict) and ("action" in value or any(name in value for name in ACTIONS))


def _element(params: dict, name: str) -> int:
    number = params.get("element", params.get("index"))
    if isinstance(number, str) and number.strip().isdigit():
        number = int(number)
    if not isinstance(number, int) or isinstance(number, bool):
        raise AnswerUnreadable(f"{name} needs \"element\": the number of an element in the list")
    return number


def _params(name: str, params: dict) -> dict:
    """The recorded parameters of action `name`."""
    if name == "click":
        return {"index": _element(params, name)}
    if name == "type":
        return {"index": _element(params, name), "text": str(params.get("text") or ""),
                "submit": bool(params.get("submit"))}
    if name == "select":
        return {"index": _element(params, name), "value": str(params.get("value") or "")}
    if name == "scroll":
        up = str(params.get("direction") or "down").lower() == "up"
        return {"dy": -SCROLL_PIXELS if up else SCROLL_PIXELS}
    if name == "goto":
        target = params.get("path") or params.get("url")
        if not isinstance(target, str) or not target.strip():
            raise AnswerUnreadable("goto needs \"path\": a page of the same website")
        return {"url": target.strip()}
    if name == "answer":
        return {"text": str(params.get("text") or "")}
    return {}


class AgentAnswer(NamedTuple):
    """A model's answer read: the action to record, its inline <think> reasoning, and the "thought" it stated."""

    action: dict
    thinking: str
    thought: str


def parse_agent_answer(text: str) -> AgentAnswer:
    """The action, the <think> block and the stated "thought" of a model's answer; AnswerUnreadable says what is
    wrong."""
    answer = answer_json(text, wanted=_is_answer)
    action = answer.get("action", answer)  # a bare {"click": {...}} is read too
    if not isinstance(action, dict) or len(action) != 1:
        raise AnswerUnreadable("\"action\" must be an object with exactly one key, the action's name")
    name, params = next(iter(action.items()))
    if name not in ACTIONS:
        raise AnswerUnreadable(f"unknown action {name!r}: use one of {', '.join(ACTIONS)}")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise AnswerUnreadable(f"the parameters of {name} must be an object")
    thought = str(answer.get("thought") or answer.get("reasoning") or "")
    return AgentAnswer({name: _params(name, params)}, thinking_of(text), thought)


def _site_prefix(task: dict) -> str:
    return f"/sites/{task['site']}/" if task.get("site") else "/"


def action_check(action: dict, observation: Observation, task: dict) -> None:
    """End the episode (AgentStop) on an element number the page does not have or a goto off the task's site."""
    name, params = next(iter(action.items()))
    if name in BY_ELEMENT:
        numbers = {e["index"] for e in observation.elements}
        if params["index"] not in numbers:
            top = max(numbers) if numbers else None
            shown = f"0 to {top}" if top is not None else "none on this page"
            raise AgentStop("bad_element", f"step {observation.step}: {name} element {params['index']}, which does "
                                           f"not exist (the page's elements: {shown})", action=action)
    if name == "goto":
        here, there = urlsplit(observation.url), urlsplit(urljoin(observation.url, params["url"]))
        prefix = _site_prefix(task)
        if (there.scheme, there.netloc) != (here.scheme, here.netloc) or not (there.path + "/").startswith(prefix):
            raise AgentStop("off_site", f"step {observation.step}: goto {params['url'][:200]} leaves the site "
                                        f"({prefix})", action=action)
