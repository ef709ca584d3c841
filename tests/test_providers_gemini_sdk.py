"""The google-genai SDK's request conversion, as the app runs it (taskgen/providers/gemini.py answers `key in model`
at once for the SDK's pydantic models): the request sent must be exactly what the unpatched SDK sends."""
from __future__ import annotations

from google import genai
from google.genai import _common as genai_common
from google.genai.models import _GenerateContentParameters_to_mldev

from taskgen.providers import gemini
from taskgen.providers.base import ProviderImage, ProviderRequest


def _converted(request: ProviderRequest) -> dict:
    client = genai.Client(api_key="test-key")
    parameters = genai.types._GenerateContentParameters(model=request.model, contents=gemini._contents(request),
                                                        config=gemini._config(request))
    return _GenerateContentParameters_to_mldev(client._api_client, parameters, None, parameters)


def test_the_request_the_sdk_builds_is_the_same_with_and_without_the_fast_membership_test(monkeypatch):
    assert genai_common.BaseModel.__contains__ is gemini._no_field_is_a_member  # installed on import
    request = ProviderRequest(model="gemini-test", system="You judge <episodes>.", prompt="Task: buy a mug. 'quoted'",
                              images=[ProviderImage(b"\x89PNG one", "image/png", label="step_1.png"),
                                      ProviderImage(b"RIFF two", "image/webp", label="final.png")],
                              json_mode=True, media_resolution="MEDIA_RESOLUTION_MEDIUM")
    fast = _converted(request)
    monkeypatch.delattr(genai_common.BaseModel, "__contains__")  # the SDK as shipped: Python walks the fields
    shipped = _converted(request)
    assert fast == shipped
    assert fast["generationConfig"]["mediaResolution"] == "MEDIA_RESOLUTION_MEDIUM"
    blobs = [part["inlineData"] for part in fast["contents"][0]["parts"] if "inlineData" in part]
    assert [(blob.mime_type, blob.data) for blob in blobs] == [("image/png", b"\x89PNG one"),
                                                               ("image/webp", b"RIFF two")]


def test_a_forked_process_makes_its_own_client(settings):
    """A child forked after its parent called Gemini does not share the parent's client (and its pooled sockets)."""
    import multiprocessing

    settings.GEMINI_API_KEY = "test-key"
    parent = gemini.gemini_client()
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=lambda: answer.put(id(gemini.gemini_client()) != id(parent)
                                                      and gemini.gemini_client() is gemini.gemini_client()))
    child.start()
    child.join(30)
    assert answer.get(timeout=5) is True
    assert gemini.gemini_client() is parent


def test_loading_the_provider_makes_its_client_before_the_first_call(settings, monkeypatch):
    """provider_load_now (before a judge's threads start) makes the client, so no first call pays for it; without
    a key it makes nothing and raises nothing (the call says what is wrong)."""
    from taskgen.providers import provider_load_now

    made = []
    monkeypatch.setattr(gemini, "_clients", gemini.ClientsPerProcess())
    real_make = gemini._make_client
    monkeypatch.setattr(gemini, "_make_client", lambda: made.append(1) or real_make())
    settings.GEMINI_API_KEY = ""
    provider_load_now("gemini")
    assert made == []
    settings.GEMINI_API_KEY = "test-key"
    provider_load_now("gemini")
    assert made == [1]
    gemini.gemini_client()
    assert made == [1]  # the call takes the client made at load
