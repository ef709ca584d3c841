"""A model as the agent (gemini or openai-compatible): at each step it is shown the task, the page (address, title,
screenshot, text) and the page's numbered elements with what it did so far, and answers one action.

An answer that cannot be read is asked again once with the reason; a second one is recorded as a failed step
(`{"invalid": {...}}`, which the harness does not execute), and UNREADABLE_STEPS such steps in a row end the episode
as failed ("unreadable"): a model that cannot phrase an action will not start to on the next page. The model's
reasoning (what the server returns apart, as `reasoning_content`, and any <think> block) and the thought its answer
states are kept apart, both. A busy model is retried with the judge's backoff rule;
when it stays down the episode fails with the reason (the run goes on). Each step's prompt, raw output, reasoning,
action, tokens and latency are kept in `steps`; `summary()` gives the episode's model, prompt version and cost.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from django.conf import settings

from taskgen.harness.agent_actions import action_check, parse_agent_answer
from taskgen.harness.agent_errors import AgentError, AgentStop
from taskgen.harness.agent_reach import off_sandbox
from taskgen.harness.observe import Observation, element_name
from taskgen.prompt_files import load_prompt_file, one_paragraph
from taskgen.providers import (
    ProviderError,
    ProviderImage,
    ProviderRequest,
    ProviderResult,
    provider_can,
    provider_check,
    provider_class,
    provider_default_model,
    provider_for,
    provider_missing,
)
from taskgen.providers.answer_json import AnswerUnreadable
from taskgen.providers.pricing import model_cost_usd
from taskgen.providers.retry import call_with_retries, retries_longest_seconds

DEFAULT_PROMPT_FILE = Path(__file__).resolve().parents[1] / "prompts" / "agent_v1.txt"
PROMPT_KEEP_CHARS = 20_000  # of each step's prompt, in the record: enough to see what the model was shown


@dataclass(frozen=True)
class AgentPrompt:
    version: str
    system: str
    step: str
    reask: str


def agent_prompt(path: str | None = None) -> AgentPrompt:
    """The agent prompt in use: `path`, else settings.AGENT_PROMPT_FILE, else the packaged default."""
    file = load_prompt_file(Path(path or settings.AGENT_PROMPT_FILE or DEFAULT_PROMPT_FILE), ("system", "step",
                                                                                                 "reask"))
    return AgentPrompt(file.version, one_paragraph(file.section("system")), file.section("step"),
                       file.section("reask"))


def _cap(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted(text: str, limit: int) -> str:
    return json.dumps(_cap(text, limit), ensure_ascii=False)


def element_list(elements: list[dict]) -> str:
    """The numbered element lines the model reads, at most settings.AGENT_MAX_ELEMENTS, each capped."""
    cap = settings.AGENT_ELEMENT_CHARS
    lines = []
    for e in elements[: settings.AGENT_MAX_ELEMENTS]:
        value = f" value={_quoted(e.get('value', ''), cap)}" if e.get("value") else ""
        options = " options=" + _quoted("|".join(o["value"] for o in e["options"]), cap) if e.get("options") else ""
        role = e.get("role") or e["tag"]
        lines.append(f"[{e['index']}] {role} {_quoted(element_name(e), cap)}{value}{options} -> "
                     f"{e.get('selector') or e['tag']}")
    hidden = len(elements) - len(lines)
    if hidden > 0:
        lines.append(f"({hidden} more elements further down are not listed: scroll to reach them)")
    return "\n".join(lines) or "(no elements to act on)"


ASKS_PER_STEP = 2  # an answer that cannot be read is asked again once, then the step is invalid
UNREADABLE_STEPS = 3  # invalid steps in a row that end the episode


def agent_step_seconds() -> float:
    """The longest one step's model calls can take: asked up to twice, each ask the retry rule's longest (what an
    episode may run past its agent's time limit, at most)."""
    return ASKS_PER_STEP * retries_longest_seconds(attempts=settings.AGENT_MAX_ATTEMPTS)


class ModelAgent:
    """The `Agent` protocol over a provider (gemini or openai-compatible)."""

    def __init__(self, *, provider: str, model: str = "", base_url: str = "", takes_images: bool | None = None,
                 max_steps: int | None = None) -> None:
        try:
            provider_check(provider, "agent")
        except ValueError as exc:
            raise AgentError(str(exc)) from exc
        self.provider_name = provider
        self.model = model or settings.AGENT_MODEL or provider_default_model(provider)
        self.provider = self._provider(provider, base_url, takes_images)
        self.prompt = agent_prompt()
        self.max_steps = max_steps or settings.HARNESS_MAX_STEPS
        self.name = f"{provider} {self.model}"
        self.task: dict = {}
        self.steps: list[dict] = []
        self.unreadable_in_a_row = 0

    @staticmethod
    def _provider(name: str, base_url: str, takes_images: bool | None):
        if provider_can(name, "server_url") and (base_url or takes_images is not None):  # this run's own server
            return provider_class(name)(base_url=base_url, takes_images=takes_images)
        if missing := provider_missing(name):
            raise AgentError(missing)
        return provider_for(name)

    def start(self, task: dict) -> None:
        if reason := off_sandbox(task):
            raise AgentError(reason)
        self.task, self.steps, self.unreadable_in_a_row = task, [], 0

    def _history(self) -> str:
        recent = self.steps[-settings.AGENT_HISTORY:] if settings.AGENT_HISTORY else []
        lines = [f"step {s['step']}: {s['action_text']} -> {s['outcome']}" for s in recent]
        return "\n".join(lines) or "(nothing yet: this is the first step)"

    def shown(self, observation: Observation) -> dict:
        """What the model is given at this step besides its task and history (for the record): the page's address
        and title, the element list and the page text, capped as the prompt has them."""
        return {"step": observation.step, "url": observation.url, "title": observation.title,
                "elements": element_list(observation.elements).splitlines(),
                "text": observation.text[: settings.AGENT_TEXT_CHARS]}

    def render(self, observation: Observation) -> str:
        """The step prompt for this observation."""
        text = observation.text[: settings.AGENT_TEXT_CHARS]
        return Template(self.prompt.step).safe_substitute(
            task=self.task.get("instruction", ""), step=observation.step, max_steps=self.max_steps,
            url=observation.url, title=observation.title, elements=element_list(observation.elements),
            history=self._history(), text=text)

    def _call(self, prompt: str, observation: Observation) -> ProviderResult:
        images = [ProviderImage(observation.screenshot, "image/png", f"step_{observation.step}.png")] \
            if observation.screenshot else []
        request = ProviderRequest(model=self.model, system=self.prompt.system, prompt=prompt, images=images)
        try:
            return call_with_retries(lambda: self.provider.complete(request), attempts=settings.AGENT_MAX_ATTEMPTS,
                                     what="agent call")
        except ProviderError as exc:
            raise AgentError(f"the model failed at step {observation.step}: {exc}", final=not exc.transient) from exc

    def act(self, observation: Observation) -> dict:
        prompt = self.render(observation)
        step = {"step": observation.step, "url": observation.url, "prompt": prompt[:PROMPT_KEEP_CHARS], "raw": [],
                "reasoning": "", "thought": "", "input_tokens": 0, "output_tokens": 0, "latency_ms": 0, "error": ""}
        self.steps.append(step)
        action = self._ask(prompt, observation, step)
        step["action"] = action
        step["action_text"] = _action_text(action)
        step["outcome"] = "not done: " + step["error"] if "invalid" in action else "done"
        if "invalid" in action:
            self._unreadable_check(observation.step, action)
        else:
            self.unreadable_in_a_row = 0
            action_check(action, observation, self.task)  # AgentStop ends the episode here, with its reason
        return action

    def _unreadable_check(self, step: int, action: dict) -> None:
        """End the episode (AgentStop "unreadable") after UNREADABLE_STEPS invalid steps in a row."""
        self.unreadable_in_a_row += 1
        if self.unreadable_in_a_row >= UNREADABLE_STEPS:
            raise AgentStop("unreadable", f"step {step}: the model's answers could not be read at {UNREADABLE_STEPS} "
                                          f"steps in a row, each asked twice (last: {action['invalid']['error']})",
                            action=action)

    def _ask(self, prompt: str, observation: Observation, step: dict) -> dict:
        """The action from the model's answer; asked once more with the reason when it cannot be read."""
        for attempt in range(1, ASKS_PER_STEP + 1):
            result = self._call(prompt, observation)
            step["raw"].append(result.text)
            step["input_tokens"] += result.input_tokens
            step["output_tokens"] += result.output_tokens
            step["latency_ms"] += result.latency_ms
            try:
                answer = parse_agent_answer(result.text)
            except AnswerUnreadable as exc:
                step["error"] = f"answer unreadable: {exc}"
                if attempt == 1:
                    prompt = prompt + "\n\n" + Template(self.prompt.reask).safe_substitute(error=str(exc))
                continue
            step["reasoning"] = "\n\n".join(part for part in (result.reasoning, answer.thinking) if part)
            step["thought"] = answer.thought
            step["error"] = ""
            return answer.action
        return {"invalid": {"error": step["error"]}}

    def outcome(self, text: str) -> None:
        """What executing the last action came to (an error message), for the next step's history."""
        if self.steps:
            self.steps[-1]["outcome"] = text

    def summary(self) -> dict:
        """The episode's model, prompt version, tokens, latency and cost."""
        tokens_in = sum(s["input_tokens"] for s in self.steps)
        tokens_out = sum(s["output_tokens"] for s in self.steps)
        return {"provider": self.provider_name, "model": self.model, "prompt_version": self.prompt.version,
                "input_tokens": tokens_in, "output_tokens": tokens_out,
                "latency_ms": sum(s["latency_ms"] for s in self.steps),
                "cost_usd": str(model_cost_usd(self.model, tokens_in, tokens_out))}


def _action_text(action: dict) -> str:
    name, params = next(iter(action.items()))
    shown = ", ".join(f"{k}={_cap(v, 80)!r}" if isinstance(v, str) else f"{k}={v}" for k, v in params.items())
    return f"{name}({shown})"
