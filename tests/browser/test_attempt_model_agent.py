"""The Done-when path of a model agent, with the fake OpenAI-compatible server standing in for vLLM: an attempt of
sandbox tasks on the engine with the `openai-compatible` agent is recorded and imported, the episode page shows
each step's reasoning (escaped) beside its screenshot, the judge judges it; a model server that fails one episode
fails only that episode's unit, with the reason, and the run goes on."""
from __future__ import annotations

import copy
import io
import json

import pytest
from django.urls import reverse

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.models import Episode, Judgment, PipelineRun, Run, Task
from taskgen.stages.export.output import export_write_dir
from taskgen.stages.export.select import export_manifest, export_select
from taskgen.stages.judge.service import judge_config_for, judge_episode
from tests import propose_helpers
from tests.agent_policy import PerTask, prompt_of
from tests.fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


@pytest.fixture
def fake_openai(settings):
    server = FakeOpenAI().start()
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = server.base_url, "qwen-test"
    settings.JUDGE_RETRY_BASE_SECONDS, settings.JUDGE_RETRY_MAX_SECONDS = 0.01, 0.05
    settings.AGENT_MAX_ATTEMPTS, settings.REDIS_URL = 2, ""
    yield server
    server.stop()


def _tasks(settings, *task_ids: str) -> tuple[list[dict], str]:
    tasks = [copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == i)) for i in task_ids]
    path = settings.DATA_ROOT / "model-tasks.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    return tasks, str(path)


def _attempt(name: str, tasks_file: str) -> PipelineRun:
    pipeline_run = run_start(stage="attempt", params={"tasks_file": tasks_file, "agent": "openai-compatible",
                                                      "name": name, "agent_options": {"model": "qwen-test"}})
    run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, stall_seconds=180)
    pipeline_run.refresh_from_db()
    return pipeline_run


def test_a_model_attempt_is_recorded_shown_with_its_reasoning_and_judged(live_server, settings, fake_openai,
                                                                         viewer_client):
    settings.SANDBOX_BASE_URL = live_server.url
    tasks, tasks_file = _tasks(settings, "sb-shop-001", "sb-mail-015")
    fake_openai.answer = PerTask(tasks)
    pipeline_run = _attempt("qwen-run", tasks_file)
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == (PipelineRun.Status.DONE, 2, 0)
    run = Run.objects.get(name="qwen-run")
    assert run.agent == "openai-compatible qwen-test" and pipeline_run.result["verifier_pass"] == 2
    episode = run.episodes.get(task__task_id="sb-mail-015")
    assert episode.status == Episode.Status.RECORDED and episode.verifier_result.ok
    steps = len(tasks[1]["verifier"]["solution"])
    assert episode.extra["agent_run"]["prompt_version"] == "agent-v1" and len(episode.extra["agent_steps"]) == steps
    assert episode.has_rows and episode.row_count == steps == len(episode.actions)

    page = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "The agent's reasoning:" in page and 'id="step-reasoning-text">I &lt;b&gt;type&lt;/b&gt; next' in page
    assert "<b>type</b>" not in page and 'data-reasoning="I &lt;b&gt;click&lt;/b&gt; next, as planned."' in page
    assert "model qwen-test · prompt agent-v1" in page

    fake_openai.answer = lambda body: {"parts": [{"part": "reply sent", "done": True, "evidence": "POST"}],
                                       "verdict": "SUCCESS"}
    config = judge_config_for("openai-compatible")
    judgment = judge_episode(episode_id=episode.pk, config_id=config.pk)
    assert judgment.verdict == Judgment.Verdict.SUCCESS

    selection = export_select(run=run, source="judge", judge_config=config)  # on to the rows export
    out = settings.DATA_ROOT / "exports" / "qwen-rows"
    export_write_dir(manifest=export_manifest(selection=selection), out=out)
    rows = [json.loads(line) for line in (out / "sb-mail-015" / "rows.jsonl").read_text().splitlines()]
    assert [r["action"] for r in rows] == episode.actions and (out / "sb-mail-015" / "step_1.png").exists()
    assert not (out / "sb-shop-001").exists()  # not judged: not exported


def test_a_model_server_failing_one_episode_fails_only_its_unit(live_server, settings, fake_openai):
    settings.SANDBOX_BASE_URL = live_server.url
    tasks, tasks_file = _tasks(settings, "sb-shop-001", "sb-shop-002")
    fake_openai.answer = PerTask(tasks)
    down_for = json.dumps(tasks[0]["instruction"], ensure_ascii=False)[1:-1]
    fake_openai.fault_when = lambda body: "503" if down_for in json.dumps(body, ensure_ascii=False) else None
    pipeline_run = _attempt("qwen-down", tasks_file)
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == (PipelineRun.Status.DONE, 1, 1)
    failed = pipeline_run.units.get(key="sb-shop-001")
    assert "the model failed at step 1" in failed.last_error and "503" in failed.last_error
    run = Run.objects.get(name="qwen-down")
    assert run.episodes.get(task__task_id="sb-shop-002").verifier_result.ok
    assert run.episodes.get(task__task_id="sb-shop-001").status == Episode.Status.FAILED


sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures


def _look_and_answer(body: dict):
    """A model with no known solution: looks at the first page, then answers and says done."""
    prompt = prompt_of(body)
    if "STEP 1 of" in prompt:
        return {"thought": "The home page lists the products; I will <i>report</i> what I see.",
                "action": {"scroll": {"direction": "down"}}}
    if "STEP 2 of" in prompt:
        return {"thought": "I have seen enough.", "action": {"answer": {"text": "Seen: <script>alert(1)</script>"}}}
    return {"thought": "Finished.", "action": {"done": {}}}


def test_an_admin_attempts_approved_proposed_tasks_with_the_openai_compatible_agent(
        live_server, settings, fake_openai, sandbox_sites, admin_client_role):
    settings.SANDBOX_BASE_URL = live_server.url
    propose = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop", "per_site": 4,
                                                                  "batch": 4})
    run_wait(pipeline_run=propose, stream=io.StringIO(), work_here=1, stall_seconds=120)
    approved = list(Task.objects.filter(site__slug="shop", source="proposed").order_by("pk")[:2])
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]),
                           {"action": "approve", "task": [t.pk for t in approved]})
    fake_openai.answer = _look_and_answer
    response = admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), {
        "sites": ["shop"], "agent": "openai-compatible", "name": "qwen-approved", "mistakes": 0, "seed": 0,
        "model": "qwen-test", "base_url": fake_openai.base_url, "images": "yes"})
    assert response.status_code == 302, response.content.decode()[-1500:]
    attempt = PipelineRun.objects.get(stage="attempt")
    assert attempt.params["agent_options"]["base_url"] == fake_openai.base_url and attempt.total == 2
    run_wait(pipeline_run=attempt, stream=io.StringIO(), work_here=1, stall_seconds=180)
    attempt.refresh_from_db()
    assert (attempt.status, attempt.done) == (PipelineRun.Status.DONE, 2)
    assert admin_client_role.get(attempt.get_absolute_url()).status_code == 200

    episode = Run.objects.get(name="qwen-approved").episodes.order_by("pk").first()
    assert episode.task.task_id == approved[0].task_id and episode.steps == 3 and episode.has_rows
    page = admin_client_role.get(episode.get_absolute_url()).content.decode()
    assert "&lt;i&gt;report&lt;/i&gt;" in page and "<i>report</i>" not in page
    assert "<script>alert(1)</script>" not in page and page.count("<img") >= 4
    judgment = judge_episode(episode_id=episode.pk, config_id=judge_config_for("rules").pk)
    assert judgment.verdict in (Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS)
