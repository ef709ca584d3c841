"""Gemini through the google-genai SDK. The base URL comes from settings.GOOGLE_GEMINI_BASE_URL (how tests reach a
fake server on 127.0.0.1); the SDK's own retries are off because the judge stage retries with the server's hint."""
from __future__ import annotations

import json
import re
import time

import httpx2 as httpx  # the SDK 3.x sends through httpx2
from django.conf import settings
from google import genai
from google.genai import _common as genai_common
from google.genai import errors as genai_errors
from google.genai import types

from taskgen.providers.base import ClientsPerProcess, ProviderError, ProviderRequest, ProviderResult
from taskgen.providers.body_deadline import BodyDeadlineTransport, timeout_words, tls_context
from taskgen.providers.retry import status_transient

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)s\s*$")
_clients = ClientsPerProcess()


def _no_field_is_a_member(model: object, key: object) -> bool:
    """`key in model` for the SDK's pydantic models, answered at once. The SDK converts every request with
    `key in data` (genai/_common.py: get_value_by_path) before it falls back to getattr; a pydantic model has no
    __contains__, so Python walks the model's (name, value) pairs, and a string key never equals a pair: the answer
    is always False, after a walk over every field, hundreds of times per request (two thirds of the conversion's
    CPU with ten screenshots). tests/test_providers_gemini_sdk.py checks the converted request is unchanged."""
    return False


if "__contains__" not in vars(genai_common.BaseModel):
    genai_common.BaseModel.__contains__ = _no_field_is_a_member


def gemini_client() -> genai.Client:
    """One SDK client per (key, base URL, timeout) per process."""
    key = (settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL, settings.JUDGE_TIMEOUT_SECONDS)
    return _clients.get(key, _make_client)


def _make_client() -> genai.Client:
    if not settings.GEMINI_API_KEY:
        raise ProviderError("GEMINI_API_KEY is not set: use the rules provider offline", transient=False)
    tls = tls_context()  # the SDK's async client and websocket take it too ("ssl"), instead of loading their own
    options = types.HttpOptions(timeout=int(settings.JUDGE_TIMEOUT_SECONDS * 1000),
                                base_url=settings.GOOGLE_GEMINI_BASE_URL or None,
                                client_args={"transport": BodyDeadlineTransport(settings.JUDGE_TIMEOUT_SECONDS),
                                             "verify": tls},
                                async_client_args={"verify": tls, "ssl": tls})
    return genai.Client(api_key=settings.GEMINI_API_KEY, http_options=options)


def retry_hint_seconds(error: genai_errors.APIError) -> float | None:
    """The server's retry hint: google.rpc.RetryInfo's retryDelay ("12s") in the body, else a Retry-After header."""
    body = error.details if isinstance(error.details, dict) else {}
    for detail in (body.get("error") or {}).get("details") or []:
        match = _DURATION.match(str(detail.get("retryDelay", ""))) if isinstance(detail, dict) else None
        if match:
            return float(match.group(1))
    headers = getattr(error.response, "headers", None) or {}
    try:
        return float(headers.get("retry-after")) if headers.get("retry-after") else None
    except ValueError:
        return None


def _config(request: ProviderRequest) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=request.system,
        temperature=request.temperature,
        max_output_tokens=8192,
        response_mime_type="application/json" if request.json_mode else None,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),  # no tools: skip the SDK loop
        media_resolution=request.media_resolution,
    )


def _contents(request: ProviderRequest) -> types.Content:
    """The user turn: the prompt, then the images. One Content, as the SDK would group bare parts: handing it over
    whole skips the SDK's grouping (a fifth of its CPU per call with ten screenshots)."""
    images = [types.Part.from_bytes(data=i.data, mime_type=i.mime_type) for i in request.images]
    return types.Content(role="user", parts=[types.Part.from_text(text=request.prompt), *images])


class GeminiProvider:
    name = "gemini"

    def warm(self) -> None:
        """Make this process's client now (provider_load_now), not in the first call: its options are pydantic
        models the SDK completes on first use, 55 ms of CPU that delayed the first call by several times that while
        the other judging threads shared the GIL. Without a key there is nothing to make; the call will say so."""
        if settings.GEMINI_API_KEY:
            gemini_client()
            probe = ProviderRequest(model="warm", system="", prompt="", json_mode=True)
            _contents(probe)  # the request's models, completed on first use as well
            _config(probe)

    def complete(self, request: ProviderRequest) -> ProviderResult:
        """One generateContent call; SDK and network failures come back as ProviderError."""
        started = time.monotonic()
        try:
            response = gemini_client().models.generate_content(
                model=request.model, contents=_contents(request), config=_config(request))
        except genai_errors.APIError as exc:
            raise ProviderError(f"gemini {exc.code}: {str(exc.message or exc)[:300]}",
                                transient=status_transient(exc.code), status=exc.code,
                                retry_after=retry_hint_seconds(exc)) from exc
        except json.JSONDecodeError as exc:  # a 200 the SDK could not read (a proxy's page): the same next time
            where = settings.GOOGLE_GEMINI_BASE_URL or "the Gemini API"
            raise ProviderError(f"gemini at {where} answered with a body that is not JSON ({exc})",
                                transient=False) from exc
        except httpx.TimeoutException as exc:
            raise ProviderError(f"gemini timeout after {settings.JUDGE_TIMEOUT_SECONDS}s{timeout_words(exc)}",
                                transient=True) from exc
        except httpx.TransportError as exc:
            raise ProviderError(f"gemini unreachable: {type(exc).__name__}: {exc}", transient=True) from exc
        usage = response.usage_metadata
        output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0) if usage else 0
        return ProviderResult(
            text=response.text or "",
            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
            output_tokens=output,
            latency_ms=int((time.monotonic() - started) * 1000),
        )
