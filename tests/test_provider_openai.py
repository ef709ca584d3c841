"""The openai-compatible provider through the real `openai` client against a fake chat-completions server on
127.0.0.1: images as data URLs (or none for a text-only model), reasoning kept, transient errors retried with the
judge's one retry rule, and the judge judging with it."""
from __future__ import annotations

import base64

import pytest

from taskgen.models import Judgment
from taskgen.providers import ProviderError, ProviderImage, ProviderRequest, provider_for
from taskgen.providers.openai_compatible import JSON_MODE_REFUSED, OpenAICompatibleProvider
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


def test_a_server_that_refuses_json_mode_is_asked_again_without_it_and_not_asked_for_it_again(fake_openai):
    fake_openai.refuses_json_mode = True
    fake_openai.answer = lambda body: 'Sure! ```json\n{"verdict": "SUCCESS", "parts": []}\n```'
    provider = provider_for("openai-compatible")
    assert "SUCCESS" in provider.complete(_request()).text and "SUCCESS" in provider.complete(_request()).text
    asked = ["response_format" in r["body"] for r in fake_openai.requests]
    assert asked == [True, False, False]
    JSON_MODE_REFUSED.discard(fake_openai.base_url)


def test_an_error_body_the_client_does_not_read_is_still_said(fake_openai):
    """LM Studio's {"error": "..."}: the client's message was 'Error code: 400' and nothing else."""
    fake_openai.script(["json_mode_400"])
    request = ProviderRequest(model="qwen-test", system="s", prompt="p", json_mode=False)
    with pytest.raises(ProviderError, match="400: Error code: 400 - 'response_format.type' must be 'json_schema'"):
        provider_for("openai-compatible").complete(request)


def test_a_key_from_the_environment_is_sent_as_a_bearer_token(fake_openai, settings):
    settings.OPENAI_API_KEY = "sk-test-not-real"
    provider_for("openai-compatible").complete(_request(images=0))
    assert fake_openai.requests[0]["headers"]["authorization"] == "Bearer sk-test-not-real"


@pytest.mark.parametrize("fault,hint", [("429", 0.05), ("503", 0.05), ("429_bare", None), ("503_bare", None),
                                        ("500", 0.05), ("timeout", None), ("trickle", None)])
def test_server_faults_are_transient_errors_with_the_servers_hint_when_it_gives_one(fake_openai, fault, hint):
    fake_openai.script([fault])
    with pytest.raises(ProviderError) as caught:
        provider_for("openai-compatible").complete(_request())
    assert caught.value.transient
    assert caught.value.retry_after == (pytest.approx(hint) if hint else None)


def test_an_answer_trickled_slower_than_the_timeout_is_cut_at_the_timeout(fake_openai, settings):
    """Each read sees a byte in time, so the client's per-read timeout never fires: the call has one deadline (the
    answer used to be waited on for as long as the server took: 85 s with a 2 s timeout)."""
    fake_openai.stall = 4.0  # a byte every 0.2 s (each read in time), a body of a few hundred bytes
    fake_openai.script(["trickle"])
    cut = r"timeout after 0.5s: the answer was still arriving 0.5s after it started"
    with pytest.raises(ProviderError, match=cut) as caught:
        provider_for("openai-compatible").complete(_request())
    assert caught.value.transient


def test_a_200_whose_body_is_not_json_names_the_server_and_what_it_said_and_is_not_tried_again(fake_openai):
    """It was a bare JSONDecodeError (or, sent as text/html, 'no choices'), which the judge tried five times."""
    fake_openai.script(["body_not_json"] * 5)
    provider = provider_for("openai-compatible")
    with pytest.raises(ProviderError) as caught:
        call_with_retries(lambda: provider.complete(_request()), attempts=4)
    assert str(caught.value).startswith(f"openai-compatible at {fake_openai.base_url} answered 200 with a body that "
                                        "is not a chat completion: '<html><head><title>502 Bad Gateway</title>")
    assert not caught.value.transient and len(fake_openai.requests) == 1


def test_a_context_too_long_is_a_permanent_error_that_says_so(fake_openai):
    fake_openai.script(["context_400"] * 5)
    provider = provider_for("openai-compatible")
    with pytest.raises(ProviderError, match="openai-compatible 400: .*maximum context length is 8192") as caught:
        call_with_retries(lambda: provider.complete(_request()), attempts=4)
    assert not caught.value.transient and caught.value.status == 400 and len(fake_openai.requests) == 1


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


def test_the_judge_records_a_body_that_is_not_json_as_its_error_after_one_call(db, fake_openai):
    fake_openai.script(["body_not_json"] * 10)
    episode = shop_episode()
    judgment = judge_episode(episode_id=episode.pk, config_id=judge_config_for("openai-compatible").pk)
    assert judgment.verdict == Judgment.Verdict.NONE and "answered 200 with a body that is not" in judgment.error
    assert len(fake_openai.requests) == 1


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
