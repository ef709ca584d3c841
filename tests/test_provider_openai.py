"""The openai-compatible provider through the real `openai` client against a fake chat-completions server on
127.0.0.1: images as data URLs (or none for a text-only model), reasoning kept, transient errors retried with the
judge's one retry rule, and the judge judging with it."""
from __future__ import annotations

import base64

import pytest

from taskgen.models import Judgment
from taskgen.providers import ProviderError, ProviderImage, ProviderRequest, provider_for
from taskgen.providers.openai_compatible import OpenAICompatibleProvider
from taskgen.providers.retry import call_with_retries
from taskgen.stages.judge.service import judge_config_for, judge_episode
from tests.fakes.openai_server import FakeOpenAI, request_images
from tests.judge_helpers import add_screenshots, shop_episode

PNG = b"\x89PNG\r\n\x1a\n-not-really-but-bytes"


@pytest.fixture
def fake_openai(settings):
    server = FakeOpenAI(retry_hint=0.05, stall=2.0).start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_MODEL = "qwen-test"
    settings.OPENAI_TAKES_IMAGES = True
    settings.JUDGE_TIMEOUT_SECONDS = 0.5
    settings.JUDGE_RETRY_BASE_SECONDS = 0.01
    settings.JUDGE_RETRY_MAX_SECONDS = 0.05
    settings.JUDGE_MAX_ATTEMPTS = 4
    settings.REDIS_URL = ""
    yield server
    server.stop()


def _request(images: int = 1) -> ProviderRequest:
    shots = [ProviderImage(PNG, "image/png", f"step_{n}.png") for n in range(images)]
    return ProviderRequest(model="qwen-test", system="be brief", prompt="what now?", images=shots)


def test_images_go_as_data_urls_with_the_system_prompt_and_json_mode(fake_openai):
    result = provider_for("openai-compatible").complete(_request(images=2))
    [sent] = fake_openai.requests
    body = sent["body"]
    assert body["model"] == "qwen-test" and body["response_format"] == {"type": "json_object"}
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert request_images(body) == ["data:image/png;base64," + base64.b64encode(PNG).decode()] * 2
    assert result.input_tokens > 1000 and result.output_tokens > 0 and result.latency_ms >= 0


def test_a_text_only_model_gets_the_prompt_alone(fake_openai, settings):
    settings.OPENAI_TAKES_IMAGES = False
    provider_for("openai-compatible").complete(_request(images=3))
    assert fake_openai.requests[0]["body"]["messages"][1]["content"] == "what now?"
    OpenAICompatibleProvider(takes_images=True).complete(_request(images=1))
    assert len(request_images(fake_openai.requests[1]["body"])) == 1


def test_the_reasoning_a_server_returns_apart_is_kept(fake_openai):
    fake_openai.answer = lambda body: ('{"click": 3}', "The cart button is number 3.")
    result = provider_for("openai-compatible").complete(_request())
    assert result.text == '{"click": 3}' and result.reasoning == "The cart button is number 3."


def test_a_key_from_the_environment_is_sent_as_a_bearer_token(fake_openai, settings):
    settings.OPENAI_API_KEY = "sk-test-not-real"
    provider_for("openai-compatible").complete(_request(images=0))
    assert fake_openai.requests[0]["headers"]["authorization"] == "Bearer sk-test-not-real"


@pytest.mark.parametrize("fault,transient", [("429", True), ("503", True), ("500", True), ("timeout", True)])
def test_server_faults_are_transient_errors(fake_openai, fault, transient):
    fake_openai.script([fault])
    with pytest.raises(ProviderError) as caught:
        provider_for("openai-compatible").complete(_request())
    assert caught.value.transient is transient
    if fault == "429":
        assert caught.value.retry_after == pytest.approx(0.05)


def test_a_server_that_is_down_is_a_transient_error_naming_it(settings):
    provider = OpenAICompatibleProvider(base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderError, match="unreachable at http://127.0.0.1:9/v1") as caught:
        provider.complete(_request())
    assert caught.value.transient


def test_no_server_configured_is_a_clear_permanent_error(settings):
    settings.OPENAI_BASE_URL = ""
    with pytest.raises(ProviderError, match="set OPENAI_BASE_URL") as caught:
        provider_for("openai-compatible").complete(_request())
    assert not caught.value.transient


def test_transient_faults_are_retried_with_the_shared_rule_then_answered(fake_openai):
    fake_openai.script(["429", "503", "ok"])
    provider = provider_for("openai-compatible")
    result = call_with_retries(lambda: provider.complete(_request()), attempts=4)
    assert result.text and [r["fault"] for r in fake_openai.requests] == ["429", "503", "ok"]


def test_the_judge_judges_with_an_openai_compatible_model(db, fake_openai):
    fake_openai.answer = lambda body: {"parts": [{"part": "buy the mug", "done": True, "evidence": "POST cart"}],
                                       "verdict": "SUCCESS"}
    fake_openai.script(["503"])
    episode = shop_episode()
    add_screenshots(episode, steps=3, size=(320, 200))
    config = judge_config_for("openai-compatible")
    judgment = judge_episode(episode_id=episode.pk, config_id=config.pk)
    assert config.model == "qwen-test"
    assert judgment.verdict == Judgment.Verdict.SUCCESS and judgment.input_tokens > 0
    assert len(fake_openai.requests) == 2 and request_images(fake_openai.requests[1]["body"])
