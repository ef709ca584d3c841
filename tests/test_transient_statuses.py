"""Faults every provider meets the same way, through the real SDKs against their fake servers on 127.0.0.1: which
HTTP statuses are tried again is one rule (taskgen.providers.retry.TRANSIENT_STATUSES; each provider had its own
copy, and they drifted: a 409 was tried again from an OpenAI-compatible server and not from Gemini), and an answer
trickled slower than the timeout is cut at it (taskgen.providers.body_deadline; both SDKs' timeouts are per read, so
both waited as long as the server took), and a 200 whose body is not JSON is an error naming the server, not tried
again (both raised a bare JSONDecodeError)."""
from __future__ import annotations

import pytest

from taskgen.providers import ProviderError, ProviderRequest
from taskgen.providers.gemini import GeminiProvider
from taskgen.providers.openai_compatible import OpenAICompatibleProvider
from taskgen.providers.retry import TRANSIENT_STATUSES
from tests.fakes.gemini_server import FakeGemini
from tests.fakes.openai_server import FakeOpenAI

STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 501, 502, 503, 504)


@pytest.fixture(scope="module")
def servers():
    gemini, openai = FakeGemini().start(), FakeOpenAI().start()
    yield gemini, openai
    gemini.stop()
    openai.stop()


def _transient(provider, server, status: int) -> bool:
    server.script([f"status_{status}"])
    with pytest.raises(ProviderError) as caught:
        provider.complete(ProviderRequest(model="m", system="s", prompt="p"))
    assert caught.value.status == status
    return caught.value.transient


def test_gemini_and_an_openai_compatible_server_agree_on_every_status(servers, settings):
    gemini, openai = servers
    settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL = "test-key-not-real", gemini.base_url
    settings.JUDGE_TIMEOUT_SECONDS, settings.OPENAI_API_KEY = 5, ""
    from_gemini = {s: _transient(GeminiProvider(), gemini, s) for s in STATUSES}
    from_openai = {s: _transient(OpenAICompatibleProvider(base_url=openai.base_url), openai, s) for s in STATUSES}
    assert from_gemini == from_openai == {s: s in TRANSIENT_STATUSES for s in STATUSES}
    assert from_gemini[409] and not from_gemini[400] and not from_gemini[413]


def test_gemini_and_an_openai_compatible_server_cut_a_trickled_answer_at_the_timeout(servers, settings):
    gemini, openai = servers
    settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL = "test-key-not-real", gemini.base_url
    settings.JUDGE_TIMEOUT_SECONDS, settings.OPENAI_API_KEY = 0.6, ""
    request = ProviderRequest(model="m", system="s", prompt="p")
    for provider, server in ((GeminiProvider(), gemini), (OpenAICompatibleProvider(base_url=openai.base_url), openai)):
        server.stall = 4.0  # a byte every 0.2 s: each read in time, the whole answer seconds long
        server.script(["trickle"])
        with pytest.raises(ProviderError, match="timeout after 0.6s: the answer was still arriving") as caught:
            provider.complete(request)
        assert caught.value.transient


def test_gemini_and_an_openai_compatible_server_say_a_200_that_is_not_json_once(servers, settings):
    gemini, openai = servers
    settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL = "test-key-not-real", gemini.base_url
    settings.JUDGE_TIMEOUT_SECONDS, settings.OPENAI_API_KEY = 5, ""
    request = ProviderRequest(model="m", system="s", prompt="p")
    for provider, server in ((GeminiProvider(), gemini), (OpenAICompatibleProvider(base_url=openai.base_url), openai)):
        server.script(["body_not_json"])
        with pytest.raises(ProviderError, match=f"at {server.base_url} answered .*body that is not") as caught:
            provider.complete(request)
        assert not caught.value.transient
