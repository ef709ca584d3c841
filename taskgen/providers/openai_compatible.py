"""Any chat-completions server (vLLM, Ollama, llama.cpp, a hosted API) through the `openai` client.

Base URL, model and whether the model takes images come from settings (OPENAI_BASE_URL, TASKGEN_OPENAI_MODEL,
TASKGEN_OPENAI_IMAGES) or from the caller (an attempt form's options); the key only from the environment. Images go
as data URLs when the model takes them; a text-only model gets the prompt alone. The client's own retries are off:
callers retry transient errors with the one rule in taskgen.providers.retry.

The answer's body is read here, not by the client, within the model timeout from its first byte (the transport of
taskgen/providers/body_deadline.py, as Gemini's). A 200 whose body is not a chat completion (a proxy's HTML page, a
crashed server's text) names the server and what it answered, and is not tried again: the same request gets the
same body. A server that refuses JSON
mode (a 400 naming response_format) is asked again without it, and not asked for it again by this process: the
callers read JSON out of plain text by one rule (taskgen/providers/answer_json.py).
"""
from __future__ import annotations

import base64
import json
import time

import httpx2 as httpx  # the client sends through httpx2
import openai
from django.conf import settings

from taskgen.providers.base import ClientsPerProcess, ProviderError, ProviderRequest, ProviderResult
from taskgen.providers.body_deadline import BodyDeadlineTransport, timeout_words
from taskgen.providers.retry import status_transient

NAME = "openai-compatible"
BODY_SHOWN_CHARS = 300  # of an answer that is not a chat completion, in the error
JSON_MODE_REFUSED: set[str] = set()  # base URLs whose server refused JSON mode, in this process
_clients = ClientsPerProcess()


def openai_client(base_url: str) -> openai.OpenAI:
    """One client per (base URL, key, timeout) per process; a local server without keys gets a placeholder key."""
    key = (base_url, settings.OPENAI_API_KEY, settings.JUDGE_TIMEOUT_SECONDS)
    return _clients.get(key, lambda: _make_client(base_url))


def _make_client(base_url: str) -> openai.OpenAI:
    timeout = settings.JUDGE_TIMEOUT_SECONDS
    http = openai.DefaultHttpxClient(transport=BodyDeadlineTransport(timeout), timeout=timeout)
    return openai.OpenAI(base_url=base_url, api_key=settings.OPENAI_API_KEY or "not-needed", timeout=timeout,
                         max_retries=0, http_client=http)


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


def _reasoning(message: dict) -> str:
    """A reasoning model's thinking, where the server returns it beside the answer (vLLM, Ollama, OpenRouter)."""
    return str(message.get("reasoning_content") or message.get("reasoning") or "")


def _completion(body: bytes, base_url: str) -> dict:
    """The chat completion in a 200's body; a body that is not one is a permanent error naming the server."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("choices", []), list):
        shown = body.decode("utf-8", "replace").strip()[:BODY_SHOWN_CHARS]
        raise ProviderError(f"{NAME} at {base_url} answered 200 with a body that is not a chat completion: "
                            f"{shown!r}", transient=False)
    return data


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
        started = time.monotonic()
        json_mode = request.json_mode and base_url not in JSON_MODE_REFUSED
        try:
            body = _send(base_url, request, messages, json_mode=json_mode)
        except ProviderError as exc:
            if not (json_mode and _refuses_json_mode(exc)):
                raise
            JSON_MODE_REFUSED.add(base_url)  # said once; the answers are read from their plain text from now on
            body = _send(base_url, request, messages, json_mode=False)
        return _result(_completion(body, base_url), started)


def _error_words(exc: openai.APIStatusError) -> str:
    """What the server said: the client's message, and the body's words where the message leaves them out (the
    client reads {"error": {"message": ...}}; LM Studio sends {"error": "..."}, which it dropped)."""
    said, body = str(exc.message), exc.body
    detail = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        detail = detail.get("message") or detail
    words = detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False) if detail else ""
    return (said if not words or words in said else f"{said} - {words}")[:BODY_SHOWN_CHARS]


def _refuses_json_mode(error: ProviderError) -> bool:
    """A 400 that names JSON mode: the server does not take response_format json_object (LM Studio, some proxies)."""
    return error.status == 400 and any(word in str(error) for word in ("response_format", "json_object"))


def _send(base_url: str, request: ProviderRequest, messages: list[dict], *, json_mode: bool) -> bytes:
    """One request; the answer's body, or a ProviderError for an HTTP or network failure."""
    extra = {"response_format": {"type": "json_object"}} if json_mode else {}
    try:
        with openai_client(base_url).chat.completions.with_streaming_response.create(
                model=request.model, messages=messages, temperature=request.temperature, **extra) as response:
            return response.read()
    except openai.APIStatusError as exc:
        raise ProviderError(f"{NAME} {exc.status_code}: {_error_words(exc)}",
                            transient=status_transient(exc.status_code), status=exc.status_code,
                            retry_after=_retry_after(exc)) from exc
    except (openai.APITimeoutError, httpx.TimeoutException) as exc:
        waited = f"timeout after {settings.JUDGE_TIMEOUT_SECONDS}s{timeout_words(exc)}"
        raise ProviderError(f"{NAME} at {base_url}: {waited}", transient=True) from exc
    except (openai.APIConnectionError, httpx.TransportError) as exc:
        raise ProviderError(f"{NAME} unreachable at {base_url}: {exc}", transient=True) from exc


def _result(completion: dict, started: float) -> ProviderResult:
    choices = completion.get("choices") or []
    if not choices or not isinstance(choices[0], dict):  # a server's error sent as a 200 (OpenRouter does)
        shown = json.dumps(completion, ensure_ascii=False)[:BODY_SHOWN_CHARS]
        raise ProviderError(f"{NAME} answer has no choices: {shown}", transient=True)
    message = choices[0].get("message") or {}
    usage = completion.get("usage") or {}
    return ProviderResult(text=str(message.get("content") or ""), reasoning=_reasoning(message),
                          input_tokens=int(usage.get("prompt_tokens") or 0),
                          output_tokens=int(usage.get("completion_tokens") or 0),
                          latency_ms=int((time.monotonic() - started) * 1000))
