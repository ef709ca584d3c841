"""Any chat-completions server (vLLM, Ollama, llama.cpp, a hosted API) through the `openai` client.

Base URL, model and whether the model takes images come from settings (OPENAI_BASE_URL, TASKGEN_OPENAI_MODEL,
TASKGEN_OPENAI_IMAGES) or from the caller (an attempt form's options); the key only from the environment. Images go
as data URLs when the model takes them; a text-only model gets the prompt alone. The client's own retries are off:
callers retry transient errors with the one rule in taskgen.providers.retry.
"""
from __future__ import annotations

import base64
import time

import openai
from django.conf import settings

from taskgen.providers.base import ClientsPerProcess, ProviderError, ProviderRequest, ProviderResult

NAME = "openai-compatible"
TRANSIENT_STATUSES = {408, 409, 429, 500, 502, 503, 504}
_clients = ClientsPerProcess()


def openai_client(base_url: str) -> openai.OpenAI:
    """One client per (base URL, key, timeout) per process; a local server without keys gets a placeholder key."""
    key = (base_url, settings.OPENAI_API_KEY, settings.JUDGE_TIMEOUT_SECONDS)
    return _clients.get(key, lambda: openai.OpenAI(base_url=base_url, api_key=settings.OPENAI_API_KEY or "not-needed",
                                                   timeout=settings.JUDGE_TIMEOUT_SECONDS, max_retries=0))


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value else None
    except (AttributeError, ValueError):
        return None


def _user_content(request: ProviderRequest, takes_images: bool) -> str | list[dict]:
    if not (takes_images and request.images):
        return request.prompt
    parts: list[dict] = [{"type": "text", "text": request.prompt}]
    for image in request.images:
        url = f"data:{image.mime_type};base64,{base64.b64encode(image.data).decode()}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _reasoning(message) -> str:
    """A reasoning model's thinking, where the server returns it beside the answer (vLLM, Ollama, OpenRouter)."""
    extra = getattr(message, "model_extra", None) or {}
    return str(extra.get("reasoning_content") or extra.get("reasoning") or "")


class OpenAICompatibleProvider:
    name = NAME

    def __init__(self, *, base_url: str = "", takes_images: bool | None = None) -> None:
        self.base_url = base_url
        self.takes_images = takes_images

    def complete(self, request: ProviderRequest) -> ProviderResult:
        """One chat completion; HTTP and network failures come back as ProviderError."""
        base_url = self.base_url or settings.OPENAI_BASE_URL
        if not base_url:
            raise ProviderError("no OpenAI-compatible server: set OPENAI_BASE_URL or give a base URL", transient=False)
        takes_images = settings.OPENAI_TAKES_IMAGES if self.takes_images is None else self.takes_images
        messages = [{"role": "system", "content": request.system},
                    {"role": "user", "content": _user_content(request, takes_images)}]
        extra = {"response_format": {"type": "json_object"}} if request.json_mode else {}
        started = time.monotonic()
        try:
            response = openai_client(base_url).chat.completions.create(
                model=request.model, messages=messages, temperature=request.temperature, **extra)
        except openai.APIStatusError as exc:
            raise ProviderError(f"{NAME} {exc.status_code}: {str(exc.message)[:300]}",
                                transient=exc.status_code in TRANSIENT_STATUSES, status=exc.status_code,
                                retry_after=_retry_after(exc)) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"{NAME} timeout after {settings.JUDGE_TIMEOUT_SECONDS}s", transient=True) from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"{NAME} unreachable at {base_url}: {exc}", transient=True) from exc
        except openai.OpenAIError as exc:  # an answer the client cannot read: garbage, not worth a retry
            raise ProviderError(f"{NAME} answer unreadable: {exc}", transient=False) from exc
        return self._result(response, started)

    @staticmethod
    def _result(response, started: float) -> ProviderResult:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ProviderError(f"{NAME} answer has no choices", transient=True)
        message = choices[0].message
        usage = response.usage
        return ProviderResult(text=message.content or "", reasoning=_reasoning(message),
                              input_tokens=(usage.prompt_tokens or 0) if usage else 0,
                              output_tokens=(usage.completion_tokens or 0) if usage else 0,
                              latency_ms=int((time.monotonic() - started) * 1000))
