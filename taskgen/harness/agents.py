"""Agents behind one interface: given a task and an observation, return the next action `{name: params}`.

The scripted agent is a simulation: it replays a task's known solution (from its verifier) and, at a set rate,
makes one seeded mistake (skips a step, types a wrong value, stops early, answers wrong), so runs have realistic
failures whose truth the verifier knows. An LLM agent implements the same `Agent` protocol.
"""
from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from django.conf import settings

from taskgen.harness.agent_errors import AgentError, AgentStop  # noqa: F401  (AgentStop: the harness's name for it)
from taskgen.harness.agent_reach import no_solution, off_sandbox
from taskgen.harness.external import external_harnesses
from taskgen.harness.model_agent import ModelAgent
from taskgen.harness.observe import Observation
from taskgen.harness.rules_agent import RULES, RULES_NAME, RulesAgent
from taskgen.names import NotPlainName, plain_name_check
from taskgen.providers import (
    provider_can,
    provider_choices,
    provider_default_model,
    provider_missing,
    provider_names,
)

SCRIPTED_NAME = "scripted (simulation)"
MISTAKES = ("skip_step", "wrong_value", "stop_early", "wrong_answer")


class Agent(Protocol):
    name: str

    def start(self, task: dict) -> None: ...

    def act(self, observation: Observation) -> dict: ...


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
        if reason := no_solution(task):
            raise AgentError(reason)
        solution = task["verifier"]["solution"]
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


MODEL_OPTIONS = ("model", "base_url", "images")  # what an attempt may set for a model agent


EXTERNAL = "external:"  # an admin-configured harness command: "external:<name>" (TASKGEN_EXTERNAL_HARNESSES)


def external_harness_name(agent: str) -> str:
    """The harness an agent name like "external:miniweb" names ("" for every other agent)."""
    return agent[len(EXTERNAL):] if agent.startswith(EXTERNAL) else ""


@dataclass(frozen=True)
class AgentKind:
    """One agent an attempt can run: its name, how forms show it, which tasks it can attempt (in words, and as a
    rule: why a task is out of its reach, "" when it is not)."""

    name: str
    label: str
    reach: str
    cannot: Callable[[dict], str]


def _any_task(task: dict) -> str:
    return ""


def agent_kinds() -> list[AgentKind]:
    """The agent list, its one home: the scripted simulation, the rules baseline, each provider that can act as an
    agent, and each external harness an admin configured."""
    return [
        AgentKind("scripted", "scripted (known solution, seeded mistakes: a simulation)",
                  "only tasks with a known solution: the sandbox's human tasks (sandbox/tasks.jsonl), never proposed "
                  "ones", no_solution),
        AgentKind(RULES, f"{RULES}: {RULES_NAME}, offline", "any task on the sandbox sites, from its instruction and "
                  "the page it sees (an offline heuristic baseline, not a model: it may fail)", off_sandbox),
        *[AgentKind(name, f"{label}: a model acts", "any task on the sandbox sites (the model needs its provider)",
                    off_sandbox) for name, label in provider_choices("agent")],
        *[AgentKind(EXTERNAL + name, f"external harness {name}: your own command, run once on the tasks",
                    "whatever your harness runs: the tasks file is handed to it whole", _any_task)
          for name in external_harnesses()],
    ]


def agent_names() -> tuple[str, ...]:
    """Every agent an attempt can run."""
    return tuple(kind.name for kind in agent_kinds())


def agent_choices() -> list[tuple[str, str]]:
    """(name, label) pairs for a form's agent field."""
    return [(kind.name, kind.label) for kind in agent_kinds()]


def agent_reach_lines() -> list[str]:
    """Which agents can attempt which tasks, a line each, for the attempt forms and the command's help."""
    return [f"{kind.name}: {kind.reach}" for kind in agent_kinds()]


def agent_cannot(name: str, task: dict) -> str:
    """Why agent `name` cannot attempt this task ("" when it can, or for an agent not in the list)."""
    kind = next((k for k in agent_kinds() if k.name == name), None)
    return kind.cannot(task) if kind else ""


def agents_able(task: dict) -> list[str]:
    """The agents that can attempt this task, in the list's order."""
    return [kind.name for kind in agent_kinds() if not kind.cannot(task)]


def _external_options_check(options: dict) -> dict:
    unknown = sorted(set(options) - {"arm"})
    if unknown:
        raise AgentError(f"unknown option(s) {', '.join(unknown)} for an external harness: it takes an arm only")
    try:
        return {"arm": plain_name_check(options.get("arm", "base"), what="the arm")}
    except NotPlainName as exc:
        raise AgentError(f"{exc}, e.g. base") from exc


def agent_options_from(values: dict) -> dict:
    """A model agent's options from a form's or the command line's raw values (none for the scripted agent; an
    external harness takes only its arm): one rule for both ways of starting an attempt."""
    agent = values.get("agent") or "scripted"
    if agent in ("scripted", RULES):
        return {}
    if external_harness_name(agent):
        return {"arm": values.get("arm") or "base"}
    chosen = {"model": values.get("model") or "", "base_url": values.get("base_url") or ""}
    if values.get("images"):
        chosen["images"] = values["images"] == "yes"
    return {key: value for key, value in chosen.items() if value != ""}


def agent_options_check(*, name: str, options: dict) -> dict:
    """A model agent's options (model, base_url, images), checked: AgentError says what is wrong. The scripted
    agent takes none of them (its mistake rate and seed are the attempt's own)."""
    if name not in agent_names():
        raise AgentError(f"unknown agent {name!r}; available: {', '.join(agent_names())}")
    if name in ("scripted", RULES):
        return dict(options)
    if external_harness_name(name):
        return _external_options_check(options)
    unknown = sorted(set(options) - set(MODEL_OPTIONS))
    if unknown:
        raise AgentError(f"unknown option(s) {', '.join(unknown)} for the {name} agent: use {', '.join(MODEL_OPTIONS)}")
    base_url = str(options.get("base_url") or "")
    parts = urlsplit(base_url)
    if base_url and (not provider_can(name, "server_url") or parts.scheme not in ("http", "https") or not parts.netloc):
        raise AgentError(f"base_url is an http(s) URL of a model server, for the "
                         f"{' or '.join(provider_names('server_url'))} agent")
    if options.get("images") not in (None, True, False):
        raise AgentError("images is true (send screenshots), false (text only) or unset (the setting)")
    if not base_url and (missing := provider_missing(name)):
        raise AgentError(missing)
    return dict(options)


def agent_label(name: str, options: dict | None = None) -> str:
    """How runs name an agent: the simulation as such, a model by provider and model."""
    if name == "scripted":
        return SCRIPTED_NAME
    if name == RULES:
        return RULES_NAME
    if harness := external_harness_name(name):
        return f"external harness {harness} (arm {(options or {}).get('arm') or 'base'})"
    model = (options or {}).get("model") or settings.AGENT_MODEL or provider_default_model(name)
    return f"{name} {model}"[:200]  # Run.agent's length


def agent_create(*, name: str, mistake_rate: float = 0.0, seed: int = 0, max_steps: int | None = None,
                 **options) -> Agent:
    """The agent called `name`: scripted, or a model agent with its options (model, base_url, images)."""
    if name == "scripted":
        return ScriptedAgent(mistake_rate=mistake_rate, seed=seed)
    if name == RULES:
        return RulesAgent(seed=seed)
    if name in provider_names("agent"):
        agent_options_check(name=name, options=options)
        return ModelAgent(provider=name, model=str(options.get("model") or ""),
                          base_url=str(options.get("base_url") or ""), takes_images=options.get("images"),
                          max_steps=max_steps)
    raise AgentError(f"unknown agent {name!r}; available: {', '.join(agent_names())}")
