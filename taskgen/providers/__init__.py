"""Model providers behind one call shape: (system, prompt, images, JSON mode) -> text + usage.

The provider table below is the one home of which providers exist and what each can do: the roles it serves (judge,
propose, agent) and its abilities (a batch API, reading screenshots, Gemini's media resolution, JSON mode, a server
named per run, running offline as a baseline). Settings validation, the judge and propose stages, the pipeline forms,
the harness's agents and the CLI all ask it, through `provider_names(ability)`, `provider_can(name, ability)` or
`provider_check(name, ability)`, never by comparing a provider's name. Pick an instance with `provider_for(name)`.
Every provider raises ProviderError; `transient` errors (429, 5xx, timeouts) may be retried.
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from functools import cache

from taskgen.collector import start_uncollected
from taskgen.providers.base import Provider, ProviderError, ProviderImage, ProviderRequest, ProviderResult

ROLES = ("judge", "propose", "agent")
# What a provider can do, in the words an error names it with: the roles, then the abilities the stages ask about.
ABILITIES: dict[str, str] = {
    "judge": "judge episodes",
    "propose": "propose tasks",
    "agent": "attempt tasks as an agent",
    "batch": "judge a run through a batch API",
    "images": "read screenshots",
    "media_resolution": "set an image's tokens itself (the image policies medium and low)",
    "json_mode": "be held to answering JSON",
    "server_url": "be pointed at a server per run (its URL, and whether its model takes images)",
    "offline": "run offline as a baseline (no model, no key, no calls to rate-limit)",
}


@dataclass(frozen=True)
class ProviderInfo:
    """One provider: its name, what it can do (ABILITIES' keys), how forms show it, and what it cannot run
    without."""

    name: str
    can: frozenset[str]
    label: str
    needs: str = ""  # the name of a setting that must be set (a key, a server), "" when it runs offline
    model_setting: str = ""  # the setting naming its default model, "" for a baseline with one model
    make: str = ""  # "module:Class" of its implementation, imported when first used (an SDK is 40 MB)


PROVIDERS: tuple[ProviderInfo, ...] = (
    ProviderInfo("rules", frozenset({"judge", "propose", "offline"}), "rules (offline baseline, not a model)",
                 make="taskgen.providers.rules:RulesProvider"),
    ProviderInfo("gemini", frozenset({"judge", "propose", "agent", "batch", "images", "media_resolution",
                                      "json_mode"}),
                 "gemini", needs="GEMINI_API_KEY", model_setting="JUDGE_MODEL",
                 make="taskgen.providers.gemini:GeminiProvider"),
    ProviderInfo("openai-compatible", frozenset({"judge", "propose", "agent", "images", "json_mode", "server_url"}),
                 "openai-compatible (any chat-completions server: vLLM, Ollama, llama.cpp)",
                 needs="OPENAI_BASE_URL", model_setting="OPENAI_MODEL",
                 make="taskgen.providers.openai_compatible:OpenAICompatibleProvider"),
)


def _known(ability: str) -> str:
    if ability not in ABILITIES:
        raise ValueError(f"unknown role or ability {ability!r}: use one of {', '.join(ABILITIES)}")
    return ability


def provider_names(ability: str | None = None) -> tuple[str, ...]:
    """Names of the providers that can do `ability` (a role or an ability; every provider when None), in the
    table's order."""
    if ability is not None:
        _known(ability)
    return tuple(p.name for p in PROVIDERS if ability is None or ability in p.can)


def provider_info(name: str) -> ProviderInfo:
    """The table's entry for `name`; ValueError names the providers there are."""
    for info in PROVIDERS:
        if info.name == name:
            return info
    raise ValueError(f"unknown provider {name!r}: use one of {', '.join(p.name for p in PROVIDERS)}")


def provider_can(name: str, ability: str) -> bool:
    """Whether the provider `name` can do `ability`; False for a name the table does not hold (a stored judge
    config of a provider since removed)."""
    return name in provider_names(ability)


def provider_check(name: str, ability: str) -> ProviderInfo:
    """The entry for `name` if it can do `ability`; ValueError names the providers that can."""
    info = provider_info(name)
    if _known(ability) not in info.can:
        able = ", ".join(provider_names(ability)) or "none here"
        raise ValueError(f"provider {name!r} cannot {ABILITIES[ability]}: use one of {able}")
    return info


def provider_offline(role: str) -> str:
    """The offline baseline serving `role`: what a form or command uses when nobody names a provider."""
    return next(name for name in provider_names(role) if provider_can(name, "offline"))


def provider_choices(role: str) -> list[tuple[str, str]]:
    """(name, label) pairs for a form's choice field of the providers serving `role`."""
    return [(p.name, p.label) for p in PROVIDERS if _known(role) in p.can]


def provider_missing(name: str) -> str:
    """Why `name` cannot run with the current settings ("" when it can): the setting it needs and lacks."""
    from django.conf import settings

    needs = provider_info(name).needs
    if needs and not getattr(settings, needs, ""):
        also = f" (or {needs}_FILE)" if needs.endswith("_KEY") else ""
        return f"the {name} provider needs {needs}{also}"
    return ""


def provider_default_model(name: str) -> str:
    """The model `name` uses when none is chosen (from its setting); "" for a provider without models."""
    from django.conf import settings

    setting = provider_info(name).model_setting
    return getattr(settings, setting, "") if setting else ""


def provider_class(name: str) -> type:
    """The class implementing the provider called `name` (imported now: an SDK loads only where it is used)."""
    module, _, cls = provider_info(name).make.partition(":")
    return getattr(importlib.import_module(module), cls)


@cache  # one instance per process: an import statement per call made 16 judging threads queue on the import lock
def provider_for(name: str) -> Provider:
    """The provider called `name`; ValueError names the ones there are."""
    return provider_class(name)()


def provider_load_now(name: str) -> None:
    """Load the provider called `name` (its SDK: google-genai is 0.3 s of CPU) in this thread, before the threads
    that will call it start: loaded on a thread of its own beside them, it shared the GIL with their database
    connections and leases, and the first call left later (0.1-0.15 s in `taskgen judge --workers 16`). A provider
    with a `warm()` makes its client now too. Uncollected, as a start is (taskgen/collector.py)."""
    with contextlib.suppress(Exception), start_uncollected():  # the calls load it again, and say what went wrong
        warm = getattr(provider_for(name), "warm", None)
        if warm is not None:
            warm()


__all__ = ["ABILITIES", "PROVIDERS", "ROLES", "Provider", "ProviderError", "ProviderImage", "ProviderInfo",
           "ProviderRequest", "ProviderResult", "provider_can", "provider_check", "provider_choices", "provider_class",
           "provider_default_model", "provider_for", "provider_info", "provider_load_now", "provider_missing",
           "provider_names", "provider_offline"]
