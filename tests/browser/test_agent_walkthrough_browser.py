"""The Done-when walkthrough in a real Chromium: an admin opens the Pipeline page, attempts the approved proposed
tasks of a site with the openai-compatible agent (the fake server standing in for vLLM), watches the run finish, opens
an episode and steps through its screenshots, each with the agent's reasoning beside it (escaped)."""
from __future__ import annotations

import io

import pytest

from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.models import PipelineRun, Run, Task
from tests import propose_helpers
from tests.agent_policy import prompt_of
from tests.factories import UserFactory
from tests.fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
HOSTILE = '<img src=x onerror="document.title=\'owned\'">'


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


def _model(body: dict) -> dict:
    prompt = prompt_of(body)
    if "STEP 1 of" in prompt:
        return {"thought": f"First I look further down the page {HOSTILE}", "action": {"scroll": {"direction": "down"}}}
    if "STEP 2 of" in prompt:
        return {"thought": "Now I can answer.", "action": {"answer": {"text": "It is there."}}}
    return {"thought": "That is all.", "action": {"done": {}}}


def test_an_admin_watches_a_model_attempt_and_reads_its_reasoning_step_by_step(
        chromium_browser, live_server, settings, sandbox_sites, monkeypatch):
    settings.SANDBOX_BASE_URL = live_server.url
    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: None)  # the engine runs here
    server = FakeOpenAI(answer=_model).start()
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = server.base_url, "qwen-test"
    propose = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop", "per_site": 2,
                                                                  "batch": 2})
    run_wait(pipeline_run=propose, stream=io.StringIO(), work_here=1, stall_seconds=120)
    Task.objects.filter(site__slug="shop", source="proposed").update(review_state=Task.ReviewState.APPROVED)
    UserFactory(username="ada", role="admin")
    page = chromium_browser.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "pw-for-tests")
        page.click("button[type=submit], input[type=submit]")
        page.goto(f"{live_server.url}/pipeline/")
        page.click("#start-attempt-approved summary")
        form = page.locator("#start-attempt-approved form")
        form.locator("select[name=sites]").select_option("shop")
        form.locator("select[name=agent]").select_option("openai-compatible")
        form.locator("input[name=name]").fill("qwen-walk")
        form.locator("input[name=model]").fill("qwen-test")
        form.locator("button[type=submit]").click()
        page.wait_for_load_state()
        attempt = PipelineRun.objects.get(stage="attempt")
        assert page.url.endswith(attempt.get_absolute_url())

        run_wait(pipeline_run=attempt, stream=io.StringIO(), work_here=1, stall_seconds=180)
        page.wait_for_function(f"() => document.querySelector('#result-{attempt.pk} h2') !== null", timeout=20_000)
        assert "done" in page.locator(f"#progress-{attempt.pk} .pill").inner_text()

        episode = Run.objects.get(name="qwen-walk").episodes.order_by("pk").first()
        page.goto(f"{live_server.url}{episode.get_absolute_url()}")
        reasoning = page.locator("#step-reasoning-text")
        assert reasoning.inner_text() == f"First I look further down the page {HOSTILE}"
        page.locator("#filmstrip figure[data-step]").nth(1).click()
        page.wait_for_function("() => document.getElementById('step-reasoning-text').textContent"
                               " === 'Now I can answer.'", timeout=5_000)
        page.locator("#filmstrip figure[data-step]").last.click()  # the final screen: no reasoning of its own
        page.wait_for_function("() => document.getElementById('step-reasoning').hidden", timeout=5_000)
        assert page.title() != "owned" and page.locator("#actions img").count() == 0
    finally:
        page.close()
        server.stop()
