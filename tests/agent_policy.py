"""A fake model's policy for agent tests: answers a sandbox task's known solution step by step, reading the element
numbers from the prompt the agent sent (as a model would), through the OpenAI-compatible or the Gemini fake."""
from __future__ import annotations

import json
import re
from collections import deque

_LINE = re.compile(r'^\[(\d+)\] (\S+) ("(?:[^"\\]|\\.)*")(.*) -> (.*)$')


def prompt_of(body: dict) -> str:
    """The step prompt in a chat-completions or a generateContent request."""
    if "messages" in body:
        content = body["messages"][-1]["content"]
        return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))


def elements_of(prompt: str) -> list[dict]:
    """The element lines of a step prompt: number, role, name, selector."""
    out = []
    for line in prompt.splitlines():
        if match := _LINE.match(line):
            out.append({"number": int(match.group(1)), "role": match.group(2), "name": json.loads(match.group(3)),
                        "selector": match.group(5)})
    return out


def _number(elements: list[dict], target: dict) -> int:
    for e in elements:
        if target.get("name") and f'[name="{target["name"]}"]' not in e["selector"]:
            continue
        if target.get("text") and not e["name"].startswith(target["text"]):
            continue
        if target.get("href_contains") and target["href_contains"] not in e["selector"]:
            continue
        return e["number"]
    raise AssertionError(f"the fake model found no element for {target} in {elements}")


class SolutionPolicy:
    """answer(body) -> {"thought", "action"}: the next solution step, its target resolved to an element number."""

    def __init__(self, task: dict, *, extra: list[dict] | None = None) -> None:
        self.plan = deque(extra or task["verifier"]["solution"])
        self.prompts: list[str] = []

    def __call__(self, body: dict) -> dict:
        prompt = prompt_of(body)
        self.prompts.append(prompt)
        step = self.plan[0] if self.plan else {"done": {}}
        name, params = next(iter(step.items()))
        params = dict(params)
        if "target" in params:
            params["element"] = _number(elements_of(prompt), params.pop("target"))
        if self.plan:
            self.plan.popleft()
        return {"thought": f"I <b>{name}</b> next, as planned.", "action": {name: params}}


class PerTask:
    """One solution policy per task, chosen by the task's instruction in the request (several episodes at once)."""

    def __init__(self, tasks: list[dict]) -> None:
        self.policies = {json.dumps(t["instruction"], ensure_ascii=False)[1:-1]: SolutionPolicy(t) for t in tasks}

    def __call__(self, body: dict) -> dict:
        text = json.dumps(body, ensure_ascii=False)
        return next(policy for goal, policy in self.policies.items() if goal in text)(body)
