"""Model providers behind one call shape: (system, prompt, images, JSON mode) -> text + usage.

The provider list below is the one home of which providers exist and which roles (judge, propose, agent) each
serves: settings validation, the judge config check, the pipeline forms and the CLI all ask `provider_names(role)` or
`provider_check(name, role)`. Pick an instance with `provider_for(name)`. Every provider raises ProviderError;
`transient` errors (429, 5xx, timeouts) may be retried.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from taskgen.providers.base import Provider, ProviderError, ProviderImage, ProviderRequest, ProviderResult

ROLES = ("judge", "propose", "agent")


@dataclass(frozen=True)
class ProviderInfo:
    """One provider: its name, the roles it serves, how forms show it, and the setting it cannot run without."""

    name: str
    roles: frozenset[str]
    label: str
    needs: str = ""  # the name of a setting that must be set (a key, a server), "" when it runs offline
    model_setting: str = ""  # the setting naming its default model, "" for a baseline with one model


PROVIDERS: tuple[ProviderInfo, ...] = (
    ProviderInfo("rules", frozenset({"judge", "propose"}), "rules (offline baseline, not a model)"),
    ProviderInfo("gemini", frozenset({"judge", "propose", "agent"}), "gemini", needs="GEMINI_API_KEY",
                 model_setting="JUDGE_MODEL"),
    ProviderInfo("openai-compatible", frozenset({"judge", "propose", "agent"}),
                 "openai-compatible (any chat-completions server: vLLM, Ollama, llama.cpp)",
                 needs="OPENAI_BASE_URL", model_setting="OPENAI_MODEL"),
)
PROVIDER_NAMES = tuple(p.name for p in PROVIDERS)


def provider_names(role: str | None = None) -> tuple[str, ...]:
    """Names of the providers that serve `role` (every provider when role is None), in the list's order."""
    if role is not None and role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    return tuple(p.name for p in PROVIDERS if role is None or role in p.roles)


def provider_info(name: str) -> ProviderInfo:
    """The list's entry for `name`; ValueError names the providers there are."""
    for info in PROVIDERS:
        if info.name == name:
            return info
    raise ValueError(f"unknown provider {name!r}: use one of {', '.join(PROVIDER_NAMES)}")


def provider_check(name: str, role: str) -> ProviderInfo:
    """The entry for `name` if it serves `role`; ValueError names the providers that do."""
    info = provider_info(name)
    if role not in info.roles:
        raise ValueError(f"provider {name!r} cannot {role}: use one of {', '.join(provider_names(role))}")
    return info


def provider_choices(role: str) -> list[tuple[str, str]]:
    """(name, label) pairs for a form's choice field of the providers serving `role`."""
    return [(p.name, p.label) for p in PROVIDERS if role in p.roles]


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


@cache  # one instance per process: an import statement per call made 16 judging threads queue on the import lock
def provider_for(name: str) -> Provider:
    """The provider called `name`; ValueError names the ones there are."""
    provider_info(name)
    if name == "gemini":
        from taskgen.providers.gemini import GeminiProvider

        return GeminiProvider()
    if name == "openai-compatible":
        from taskgen.providers.openai_compatible import OpenAICompatibleProvider

        return OpenAICompatibleProvider()
    from taskgen.providers.rules import RulesProvider

    return RulesProvider()


__all__ = ["PROVIDERS", "PROVIDER_NAMES", "ROLES", "Provider", "ProviderError", "ProviderImage", "ProviderInfo",
           "ProviderRequest", "ProviderResult", "provider_check", "provider_choices", "provider_default_model",
           "provider_for", "provider_info", "provider_missing", "provider_names"]
