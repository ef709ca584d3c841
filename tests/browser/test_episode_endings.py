"""What ended an episode, at which step, in what time, and the task's verifier, on the episode page and in the run
table (issue 23, item 5): a failed sandbox episode used to show finished "error" with the end reason "step limit",
hide its end reason, say "No programmatic verifier" and speak of the live web. Real Chromium episodes through the
engine, against a model server that is down and a fake OpenAI-compatible server that answers a solution."""
from __future__ import annotations

import copy
import io
import json
import re
from html import unescape

import pytest

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.models import Episode, PipelineRun, Run
from tests.agent_policy import SolutionPolicy
from tests.fakes.openai_server import FakeOpenAI
from tests.ports import free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


@pytest.fixture
def fast(settings, live_server):
    settings.JUDGE_RETRY_BASE_SECONDS, settings.JUDGE_RETRY_MAX_SECONDS = 0.01, 0.05
    settings.JUDGE_TIMEOUT_SECONDS, settings.AGENT_MAX_ATTEMPTS = 5, 2
    settings.SANDBOX_BASE_URL = live_server.url
    settings.OPENAI_API_KEY = ""


def _attempt(settings, tmp_path, name: str, task_ids: list[str], **options) -> PipelineRun:
    tasks = [copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == i)) for i in task_ids]
    tasks_file = tmp_path / f"{name}.jsonl"
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    pipeline_run = run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": "openai-compatible",
                                                      "name": name, "agent_options": options})
    run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, stall_seconds=120)
    pipeline_run.refresh_from_db()
    return pipeline_run


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_a_failed_sandbox_episode_says_what_ended_it_at_which_step_and_shows_its_verifier(
        fast, settings, tmp_path, viewer_client):
    pipeline_run = _attempt(settings, tmp_path, "down", ["sb-shop-001"],
                            base_url=f"http://127.0.0.1:{free_port()}/v1")
    assert (pipeline_run.status, pipeline_run.failed) == (PipelineRun.Status.DONE, 1), pipeline_run.errors
    episode = Episode.objects.get(run__name="down")
    assert (episode.status, episode.finished, episode.end_step) == (Episode.Status.FAILED, "error", 1)
    assert "the model failed at step 1" in episode.end_reason and "step limit" not in episode.end_reason

    page = _text(viewer_client.get(episode.get_absolute_url()).content.decode())
    assert "failed Ended at step 1: the episode failed in the harness — AgentError: the model failed at step 1" in page
    assert "step limit" not in page and "live web" not in page and "No programmatic verifier" not in page
    assert ("not run This task has a sandbox verifier; the episode failed (failed at step 1), so the verifier did "
            "not check its final state.") in page
    assert "· not checked the answer states the price" in page  # its checks, named
    assert "Browser time" in page and "of the episode's limit of 120 s (TASKGEN_HARNESS_EPISODE_SECONDS" in page
    assert "The model's own time deciding" in page and "of its limit of 600 s (TASKGEN_AGENT_MODEL_SECONDS)" in page

    table = viewer_client.get(Run.objects.get(name="down").get_absolute_url()).content.decode()
    assert re.search(r'<td class="ended" title="AgentError: the model failed at step 1[^"]*"><span class="pill bad">'
                     r"failed at step 1</span>", table)


def test_an_episode_that_ran_its_course_says_how_it_ended_and_its_verifier_parts(fast, settings, tmp_path,
                                                                                viewer_client):
    server = FakeOpenAI().start()
    try:
        task = next(t for t in sandbox_tasks() if t["task_id"] == "sb-shop-001")
        server.answer = SolutionPolicy(task)
        pipeline_run = _attempt(settings, tmp_path, "solved", ["sb-shop-001"], base_url=server.base_url)
    finally:
        server.stop()
    assert pipeline_run.status == PipelineRun.Status.DONE and pipeline_run.failed == 0, pipeline_run.errors
    episode = Episode.objects.get(run__name="solved")
    assert (episode.status, episode.finished, episode.end_step) == (Episode.Status.RECORDED, "done", episode.steps)
    page = _text(viewer_client.get(episode.get_absolute_url()).content.decode())
    assert f"Ended at step {episode.steps}: the agent said it was done" in page
    assert "✓ passed the answer states the price" in page and "not run" not in page
    table = viewer_client.get(episode.run.get_absolute_url()).content.decode()
    assert f'<td class="ended">done at step {episode.steps}</td>' in table
