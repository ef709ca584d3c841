"""The gemini proposer through the real google-genai SDK against the fake Gemini server on 127.0.0.1: prompts
(focus rotation, avoid-list, JSON mode, the versioned prompt), duplicates, garbage and bare-list answers, grounding,
a busy model; and a propose run worked by a real Celery worker."""
from __future__ import annotations

import json

import pytest

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.worker import work
from taskgen.models import PipelineRun, ProposalBatch, Task
from tests import propose_helpers
from tests.fakes.gemini_server import FakeGemini

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_gemini(settings):
    server = FakeGemini(retry_hint=0.1).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    settings.JUDGE_TIMEOUT_SECONDS = 5
    yield server
    server.stop()


def _prompt(request: dict) -> str:
    return request["body"]["contents"][0]["parts"][0]["text"]


def _propose(**raw) -> PipelineRun:
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "gemini", **raw})
    for _ in range(200):
        again = work(pipeline_run_id=pipeline_run.pk, owner="test")
        if again is None:
            break
        PipelineRunWait.sleep(again)
    pipeline_run.refresh_from_db()
    return pipeline_run


class PipelineRunWait:
    @staticmethod
    def sleep(seconds: float) -> None:
        import time

        time.sleep(min(seconds, 0.5))


def test_successive_prompts_rotate_the_focus_and_carry_the_avoid_list(sandbox_sites, fake_gemini):
    pipeline_run = _propose(sites="shop", per_site=40, batch=10, seed=7, model="gemini-test")
    prompts = [_prompt(r) for r in fake_gemini.requests]
    assert len(prompts) == 4 and pipeline_run.status == PipelineRun.Status.DONE
    assert "the site's main sections" in prompts[0] and "the site's main sections" in prompts[3]
    assert "involve these pages: /sites/shop/" in prompts[1] and "involve these pages: /sites/shop/" in prompts[2]
    assert prompts[1].split("these pages:")[1][:80] != prompts[2].split("these pages:")[1][:80]
    assert "not to repeat: (none yet)" in prompts[0]
    first_batch = Task.objects.filter(proposal_batch__index=0).values_list("instruction", flat=True)
    assert all(text[:90] in prompts[1] for text in first_batch)
    assert "About 4 of the goals ask for information" in prompts[0] and "The other 6 change" in prompts[0]
    assert "PAGES\n/sites/shop/  Maison Épicerie — home" in prompts[0]
    body = fake_gemini.requests[0]["body"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["temperature"] == 1.0
    assert "You invent goals for people using one website" in body["systemInstruction"]["parts"][0]["text"]
    assert fake_gemini.requests[0]["model"] == "gemini-test"
    task = Task.objects.first()
    assert (task.proposed_by_model, task.prompt_version, task.proposal_batch.provider) == (
        "gemini-test", "propose-v1", "gemini")


def test_duplicates_across_batches_and_against_the_database_are_dropped(sandbox_sites, fake_gemini):
    same = [{"instruction": f"Find the cheapest tea and report its price, version {k}", "kind": "info"}
            for k in range(5)]
    fake_gemini.answer = lambda body: {"tasks": same}
    first = _propose(sites="shop", per_site=5, batch=5)
    assert Task.objects.filter(proposal_batch__pipeline_run=first).count() == 5
    second = _propose(sites="shop", per_site=10, batch=5)
    batches = ProposalBatch.objects.filter(pipeline_run=second)
    assert Task.objects.filter(proposal_batch__pipeline_run=second).count() == 0
    assert sum(b.duplicates for b in batches) == 5 * batches.count() and batches.count() == 4
    assert second.result["sites"][0]["duplicates"] == 20


def test_a_garbage_answer_and_a_bare_list_are_handled_and_counted(sandbox_sites, fake_gemini):
    fake_gemini.script(["non_json", "bare_list"])
    pipeline_run = _propose(sites="mail", per_site=10, batch=5)
    assert pipeline_run.status == PipelineRun.Status.DONE and pipeline_run.failed == 0
    garbage, bare = ProposalBatch.objects.filter(pipeline_run=pipeline_run).order_by("index")[:2]
    assert garbage.kept == 0 and "not JSON" in garbage.answer_error and garbage.raw_answer.startswith("I think")
    assert bare.kept == 5 and not bare.answer_error and bare.raw_answer.startswith("[")
    assert Task.objects.filter(site__slug="mail").count() == 10  # the spare batches made up for the garbage one
    assert pipeline_run.result["sites"][0]["unreadable_answers"] == 1


def test_items_without_an_instruction_are_counted_invalid(sandbox_sites, fake_gemini):
    fake_gemini.answer = lambda body: {"tasks": [{"kind": "info"}, {"instruction": ""}, "text",
                                                 {"instruction": "Find the compose page and write to Amélie Dubois"}]}
    pipeline_run = _propose(sites="mail", per_site=1, batch=4)
    batch = ProposalBatch.objects.get(pipeline_run=pipeline_run, index=0)
    assert (batch.kept, batch.invalid) == (1, 3)


def test_a_task_naming_something_not_on_the_site_is_flagged(sandbox_sites, fake_gemini):
    fake_gemini.answer = lambda body: {"tasks": [
        {"instruction": "What does “Kenyan AA Whole Beans” cost? Report the price.", "kind": "info"},
        {"instruction": "Add two bags of “Golden Unicorn Tea” to the cart", "kind": "action"},
        {"instruction": "Send the order confirmation to Marcel Proust by email", "kind": "action"},
        {"instruction": "Sort the products by price from low to high", "kind": "action"}]}
    _propose(sites="shop", per_site=4, batch=4)
    notes = dict(Task.objects.values_list("instruction", "grounding_note"))
    assert notes["What does “Kenyan AA Whole Beans” cost? Report the price."] == ""
    assert notes["Sort the products by price from low to high"] == ""
    assert notes["Add two bags of “Golden Unicorn Tea” to the cart"] == \
        "names something not on the site: “Golden Unicorn Tea”"
    assert "“Marcel Proust”" in notes["Send the order confirmation to Marcel Proust by email"]


def test_a_busy_model_is_asked_again_later(sandbox_sites, fake_gemini):
    fake_gemini.script(["429", "503"])
    pipeline_run = _propose(sites="booking", per_site=5, batch=5)
    assert pipeline_run.status == PipelineRun.Status.DONE and pipeline_run.failed == 0
    assert Task.objects.filter(site__slug="booking").count() == 5
    assert [r["fault"] for r in fake_gemini.requests][:3] == ["429", "503", "ok"]


def test_gemini_without_a_key_is_refused_at_the_start(sandbox_sites, settings):
    settings.GEMINI_API_KEY = ""
    with pytest.raises(StageParamsError, match="GEMINI_API_KEY"):
        run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "gemini", "sites": "shop"})


def test_the_batch_keeps_what_it_was_shown(sandbox_sites, fake_gemini):
    pipeline_run = _propose(sites="shop", per_site=3, batch=3)
    batch = ProposalBatch.objects.get(pipeline_run=pipeline_run, index=0)
    assert batch.prompt == _prompt(fake_gemini.requests[0]) and batch.context in batch.prompt
    assert json.loads(batch.raw_answer)["tasks"] and batch.asked == 3 and batch.model == "gemini-3.5-flash"


def test_an_openai_compatible_server_proposes_through_the_same_interface(sandbox_sites, settings):
    from tests.fakes.openai_server import FakeOpenAI

    tasks = [{"instruction": f"Find the room number {k} and report its nightly price", "kind": "info"}
             for k in range(4)]
    server = FakeOpenAI(answer=lambda body: tasks).start()  # a bare list, as some models answer
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = server.base_url, "qwen-test"
    try:
        pipeline_run = _propose(provider="openai-compatible", sites="booking", per_site=4, batch=4)
    finally:
        server.stop()
    assert pipeline_run.status == "done" and Task.objects.filter(site__slug="booking").count() == 4
    body = server.requests[0]["body"]
    assert body["model"] == "qwen-test" and body["temperature"] == 1.0
    assert body["response_format"] == {"type": "json_object"} and "Please write 4 goals" in str(body["messages"])
    assert Task.objects.first().proposed_by_model == "qwen-test"
