"""Model providers behind one call shape: (system, prompt, images, JSON mode) -> text + usage.

`gemini` calls the google-genai SDK; `rules` is the offline, deterministic baseline judge. Pick one with
`provider_for(name)`. Every provider raises ProviderError; `transient` errors (429, 5xx, timeouts) may be retried.
"""
from __future__ import annotations

from functools import cache

from taskgen.providers.base import Provider, ProviderError, ProviderImage, ProviderRequest, ProviderResult

PROVIDER_NAMES = ("gemini", "rules")


@cache  # one instance per process: an import statement per call made 16 judging threads queue on the import lock
def provider_for(name: str) -> Provider:
    """The provider called `name`; ValueError names the ones there are."""
    if name == "gemini":
        from taskgen.providers.gemini import GeminiProvider

        return GeminiProvider()
    if name == "rules":
        from taskgen.providers.rules import RulesProvider

        return RulesProvider()
    raise ValueError(f"unknown provider {name!r}: use one of {', '.join(PROVIDER_NAMES)}")


__all__ = ["PROVIDER_NAMES", "Provider", "ProviderError", "ProviderImage", "ProviderRequest", "ProviderResult",
           "provider_for"]
