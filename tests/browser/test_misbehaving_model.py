"""An OpenAI-compatible model that misbehaves as small open models and their servers do, driving real Chromium
episodes through the attempt stage (issue 23's test): one task solved with an unreadable step on the way and its
reasoning in `reasoning_content`, one that names an element the page does not have, one whose every answer is prose,
one answered by a 200 that is not JSON (a proxy's error page), one refused with a 400 for a context too long. The
rows hold only the actions the browser performed, numbered without gaps; each episode's end reason is the true one,
and its page says it."""
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
from taskgen.models import Episode, PipelineRun
from tests.agent_policy import SolutionPolicy
from tests.fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SOLVED, BAD_ELEMENT, PROSE, NOT_JSON, TOO_LONG = ("sb-shop-001", "sb-shop-007", "sb-mail-003", "sb-mail-021",
                                                  "sb-booking-005")
THINKING = "The search box is the first element; I search before I read a price."


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


def _task(task_id: str) -> dict:
    return copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == task_id))


class Mix:
    """The fake model: what it answers, and which fault the server sends instead, chosen by the request's task."""

    def __init__(self) -> None:
        self.goals = {json.dumps(_task(i)["instruction"], ensure_ascii=False)[1:-1]: i
                      for i in (SOLVED, BAD_ELEMENT, PROSE, NOT_JSON, TOO_LONG)}
        self.calls = {i: 0 for i in self.goals.values()}
        self.solution = SolutionPolicy(_task(SOLVED))
        self.wanders = SolutionPolicy(_task(BAD_ELEMENT), extra=[{"scroll": {"direction": "down"}},
                                                                  {"click": {"element": 999}}])

    def task_of(self, body: dict) -> str:
        text = json.dumps(body, ensure_ascii=False)
        return next(task_id for goal, task_id in self.goals.items() if goal in text)

    def fault(self, body: dict) -> str | None:
        task_id = self.task_of(body)
        self.calls[task_id] += 1
        if task_id == SOLVED and self.calls[task_id] in (2, 3):  # step 2 unreadable, asked twice
            return "non_json"
        return {NOT_JSON: "body_not_json", TOO_LONG: "context_400"}.get(task_id)

    def answer(self, body: dict):
        task_id = self.task_of(body)
        if task_id == SOLVED:
            return json.dumps(self.solution(body)), THINKING
        if task_id == BAD_ELEMENT:
            return self.wanders(body)
        return "I would probably look at the page a bit more, then decide."


@pytest.fixture
def episodes(settings, live_server, tmp_path):
    settings.JUDGE_RETRY_BASE_SECONDS, settings.JUDGE_RETRY_MAX_SECONDS = 0.01, 0.05
    settings.JUDGE_TIMEOUT_SECONDS, settings.AGENT_MAX_ATTEMPTS = 5, 3
    settings.SANDBOX_BASE_URL, settings.OPENAI_API_KEY = live_server.url, ""
    mix, server = Mix(), FakeOpenAI().start()
    server.answer, server.fault_when = mix.answer, mix.fault
    tasks_file = tmp_path / "mix.jsonl"
    tasks_file.write_text("".join(json.dumps(_task(i), ensure_ascii=False) + "\n" for i in mix.calls),
                          encoding="utf-8")
    try:
        pipeline_run = run_start(stage="attempt", params={
            "tasks_file": str(tasks_file), "agent": "openai-compatible", "name": "mix",
            "agent_options": {"base_url": server.base_url}})
        run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, stall_seconds=300)
    finally:
        server.stop()
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == PipelineRun.Status.DONE, pipeline_run.errors
    return {e.task.task_id: e for e in Episode.objects.filter(run__name="mix").select_related("task")}, mix


def _rows(episode: Episode) -> list[dict]:
    return [json.loads(line) for line in episode.rows_jsonl.splitlines() if line.strip()]


def _page(client, episode: Episode) -> str:
    html = client.get(episode.get_absolute_url()).content.decode()
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def _kinds(actions: list[dict]) -> list[str]:
    return [next(iter(a)) for a in actions]


def test_a_misbehaving_model_leaves_rows_endings_and_pages_true_to_what_happened(episodes, viewer_client):
    by_task, mix = episodes

    solved = by_task[SOLVED]
    assert (solved.status, solved.finished, solved.end_step) == (Episode.Status.RECORDED, "done", 5)
    assert _kinds(solved.actions) == ["type", "invalid", "click", "answer", "done"]
    rows = _rows(solved)
    assert [(r["step"], r["image"], next(iter(r["action"]))) for r in rows] == [
        (1, "step_1.png", "type"), (2, "step_2.png", "click"), (3, "step_3.png", "answer"), (4, "step_4.png", "done")]
    page = _page(viewer_client, solved)
    assert "Ended at step 5: the agent said it was done" in page
    assert f"{THINKING} Stated thought: I <b>type</b> next, as planned." in page  # both, escaped

    wandered = by_task[BAD_ELEMENT]
    assert (wandered.finished, wandered.end_step) == ("bad_element", 2)
    assert wandered.actions[1] == {"invalid": {"error": wandered.end_reason, "action": {"click": {"index": 999}}}}
    assert [(r["step"], r["action"]) for r in _rows(wandered)] == [(1, {"scroll": {"dy": 600}})]  # no made-up done
    assert "Ended at step 2: the agent named an element the page does not have — step 2: click element 999, which " \
           "does not exist" in _page(viewer_client, wandered)

    prose = by_task[PROSE]
    assert (prose.status, prose.finished, prose.end_step) == (Episode.Status.FAILED, "unreadable", 3)
    assert _rows(prose) == [] and mix.calls[PROSE] == 6  # three steps, each asked twice: not twenty
    assert "Ended at step 3: the model's answers could not be read — step 3: the model's answers could not be read " \
           "at 3 steps in a row" in _page(viewer_client, prose)

    for task_id, said in ((NOT_JSON, "answered 200 with a body that is not a chat completion: '<html>"),
                          (TOO_LONG, "openai-compatible 400: Error code: 400 - This model's maximum context length")):
        failed = by_task[task_id]
        assert (failed.status, failed.finished, failed.end_step) == (Episode.Status.FAILED, "error", 1)
        assert said in failed.end_reason and _rows(failed) == [] and mix.calls[task_id] == 1  # never tried again
        page = _page(viewer_client, failed)
        assert "Ended at step 1: the episode failed in the harness — AgentError: the model failed at step 1" in page
        assert said[:60] in page
