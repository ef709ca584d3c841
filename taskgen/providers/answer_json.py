"""Reading the JSON out of a model's answer: one rule for the judge, the proposer and the agent.

A model asked for JSON may send it whole, inside a ``` fence, after some prose (which may hold braces of its own),
or after an inline <think> block (a reasoning model's thinking, which is never the answer). The value read is the
first, in that order, that the caller wants (`wanted`: the judge a verdict, the proposer its tasks, the agent an
action); else the first JSON object (or list, where the caller takes one) found; else AnswerUnreadable.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable

_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
MAX_STARTS = 200  # places in the text a value may start at, tried in order (a long answer is not read forever)


class AnswerUnreadable(ValueError):
    """A model's answer holds no JSON its reader can use; the message says what is wrong (for the model, when it
    is asked again)."""


def thinking_of(text: str) -> str:
    """The answer's inline <think> blocks, joined: the model's reasoning, not its answer."""
    return " ".join(m.group(1).strip() for m in _THINK.finditer(text or ""))


def _values(body: str, lists: bool):
    """The JSON objects (and lists) in the text, in the rule's order: the whole, each fence, each place one starts."""
    for candidate in [body.strip()] + [m.strip() for m in _FENCE.findall(body)]:
        try:
            yield json.loads(candidate)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    openers = "{[" if lists else "{"
    for start in [i for i, c in enumerate(body) if c in openers][:MAX_STARTS]:
        try:
            yield decoder.raw_decode(body, start)[0]
        except ValueError:
            continue


def answer_json(text: str | None, *, wanted: Callable[[object], bool] = lambda value: True,
                lists: bool = False) -> dict | list:
    """The JSON object (or list, with `lists`) of a model's answer: see the module's docstring for the rule."""
    fallback = None
    for value in _values(_THINK.sub("", text or ""), lists):
        if not (isinstance(value, dict) or (lists and isinstance(value, list))):
            continue
        if wanted(value):
            return value
        if fallback is None:
            fallback = value
    if fallback is None:
        raise AnswerUnreadable("it is not a JSON object" if not lists else "it holds no JSON object or list")
    return fallback
