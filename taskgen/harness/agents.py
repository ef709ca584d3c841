"""Agents behind one interface: given a task and an observation, return the next action `{name: params}`.

The scripted agent is a simulation: it replays a task's known solution (from its verifier) and, at a set rate,
makes one seeded mistake (skips a step, types a wrong value, stops early, answers wrong), so runs have realistic
failures whose truth the verifier knows. An LLM agent implements the same `Agent` protocol.
"""
from __future__ import annotations

import copy
import random
from typing import Protocol

from taskgen.harness.observe import Observation

SCRIPTED_NAME = "scripted (simulation)"
MISTAKES = ("skip_step", "wrong_value", "stop_early", "wrong_answer")


class Agent(Protocol):
    name: str

    def start(self, task: dict) -> None: ...

    def act(self, observation: Observation) -> dict: ...


class AgentError(RuntimeError):
    """The agent cannot attempt this task (for the scripted agent: the task has no known solution)."""


class AgentStop(Exception):  # noqa: N818 (a clean end of an episode, not an error)
    """The episode ends here, cleanly, for a reason the record keeps: `finished` says which kind (bad_element,
    off_site), `reason` says it in words."""

    def __init__(self, finished: str, reason: str) -> None:
        super().__init__(reason)
        self.finished = finished
        self.reason = reason


def find_element(elements: list[dict], target: dict) -> dict | None:
    """The first element matching a solution step's target: by name, exact text, text prefix, or link."""
    def hit(e: dict) -> bool:
        if target.get("name") and e["name"] != target["name"]:
            return False
        shown = e["text"] if e["tag"] in ("a", "button") else ""  # an input's text is its value, not its name
        if target.get("text") and target["text"] not in (shown, e["label"]):
            return False
        return not target.get("href_contains") or target["href_contains"] in e["href"]
    return next((e for e in elements if hit(e)), None)


def _garble(text: str) -> str:
    """A plausible wrong value: one digit off, or the last word dropped (a near miss, not noise)."""
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    if digits:
        i = digits[-1]
        return text[:i] + str((int(text[i]) + 3) % 10) + text[i + 1:]
    words = text.split()
    return " ".join(words[:-1]) if len(words) > 1 else text + "s"


class ScriptedAgent:
    """Follows the task's solution step by step; a mistake, if drawn for this episode, is planned at start."""

    name = SCRIPTED_NAME

    def __init__(self, *, mistake_rate: float = 0.0, seed: int = 0) -> None:
        self.mistake_rate = mistake_rate
        self.seed = seed
        self.plan: list[dict] = []
        self.mistake: str | None = None

    def start(self, task: dict) -> None:
        solution = ((task.get("verifier") or {}).get("solution")) or []
        if not solution:
            raise AgentError(f"task {task.get('task_id')} has no known solution for the scripted agent")
        rng = random.Random(f"{self.seed}:{task.get('task_id')}")
        self.plan = copy.deepcopy(solution)
        self.mistake = rng.choice(MISTAKES) if rng.random() < self.mistake_rate else None
        if self.mistake:
            self.plan = self._with_mistake(self.plan, self.mistake, rng)

    @staticmethod
    def _with_mistake(plan: list[dict], mistake: str, rng: random.Random) -> list[dict]:
        doable = [i for i, a in enumerate(plan) if next(iter(a)) not in ("answer", "done")]
        typed = [i for i, a in enumerate(plan) if next(iter(a)) in ("type", "select")]
        answers = [i for i, a in enumerate(plan) if next(iter(a)) == "answer"]
        if mistake == "wrong_answer" and not answers:
            mistake = "wrong_value" if typed else "skip_step"
        if mistake == "wrong_value" and not typed:
            mistake = "skip_step"
        if mistake == "skip_step" and doable:
            del plan[rng.choice(doable)]
        elif mistake == "stop_early" and doable:
            plan = plan[: rng.randint(0, len(doable) - 1)] + [{"done": {}}]
        elif mistake == "wrong_value":
            step = plan[rng.choice(typed)]
            params = step.get("type") or step.get("select")
            key = "text" if "type" in step else "value"
            if key == "text":
                params["text"] = _garble(str(params["text"]))
            else:
                params["wrong_instead_of"] = params["value"]
        elif mistake == "wrong_answer":
            params = plan[answers[0]]["answer"]
            params["text"] = _garble(params["text"])
        return plan

    def act(self, observation: Observation) -> dict:
        if not self.plan:
            return {"done": {}}
        step = self.plan.pop(0)
        name, params = next(iter(step.items()))
        if "target" not in params:
            return {name: params}
        element = find_element(observation.elements, params["target"])
        if element is None:  # what a confused agent does: gives up where it is
            self.plan = []
            return {"done": {"reason": "could not find the element to act on"}}
        resolved = {k: v for k, v in params.items() if k != "target"}
        if name == "select" and "wrong_instead_of" in resolved:  # the seeded wrong choice
            right = resolved.pop("wrong_instead_of")
            others = [o["value"] for o in element["options"] if o["value"] and o["value"] != right]
            resolved["value"] = others[0] if others else ""
        return {name: {"index": element["index"], **resolved}}


def agent_create(*, name: str, mistake_rate: float = 0.0, seed: int = 0) -> Agent:
    if name == "scripted":
        return ScriptedAgent(mistake_rate=mistake_rate, seed=seed)
    raise AgentError(f"unknown agent {name!r}: this version has the 'scripted' agent (a simulation)")
