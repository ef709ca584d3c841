"""Proposed tasks attempted offline (issue 23, item 7): approving proposed tasks and attempting them with the
scripted agent failed each with "has no known solution", tried three times, and the form said nothing. Now the
`rules` baseline attempts any sandbox task from its instruction and the page (real Chromium episodes), from the web
form and the command line; the forms and the command say which agent can attempt which tasks; an agent given a task
it cannot attempt records a failed episode with the reason, tried once; and every page says it is a baseline."""
from __future__ import annotations

import copy
import io
import json
import threading

import pytest
from django.core.management import call_command
from django.db import connection

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_start
from taskgen.engine.worker import work
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.harness.episode import episode_run
from taskgen.harness.rules_agent import RULES_NAME, SAID, RulesAgent
from taskgen.models import Episode, PipelineRun, Run, Task
from tests import propose_helpers
from tests.browser.test_workbench_truth import _log_in

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


@pytest.fixture
def approved(sandbox_sites, settings, live_server) -> list[Task]:
    """Two proposed tasks of the shop, approved (as the Tasks page does), the rest left proposed."""
    settings.SANDBOX_BASE_URL = live_server.url
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop",
                                                                       "per_site": 4, "batch": 4})
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    tasks = list(Task.objects.filter(site__slug="shop", source="proposed").order_by("pk")[:2])
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(review_state=Task.ReviewState.APPROVED)
    return tasks


def _work_in_thread(pipeline_run_id: int) -> None:
    def worker() -> None:
        try:
            while work(pipeline_run_id=pipeline_run_id, owner="offline-test") is not None:
                pass
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=240)
    assert not thread.is_alive()


def test_approved_proposed_tasks_are_attempted_offline_from_the_tasks_page(page, live_server, approved, monkeypatch):
    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: None)  # worked below, here
    _log_in(page, live_server, "ada", role="admin")
    page.goto(f"{live_server.url}/tasks/")
    assert page.locator("#id_agent").input_value() == "rules"  # the agent that can attempt proposed tasks
    reach = page.locator(".agent-reach").inner_text()
    assert "scripted: only tasks with a known solution" in reach and "rules: any task on the sandbox sites" in reach
    page.select_option("#id_sites", "shop")
    page.fill("#id_name", "offline-shop")
    page.click("form[action$='/attempt-approved/'] button[type=submit]")
    page.wait_for_url("**/pipeline/*/")
    pipeline_run = PipelineRun.objects.get(stage="attempt")
    assert pipeline_run.total == 2 and pipeline_run.params["agent"] == "rules"

    _work_in_thread(pipeline_run.pk)
    page.wait_for_function(f"() => document.querySelector('#result-{pipeline_run.pk} h2') !== null", timeout=20_000)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 2, 0), pipeline_run.errors
    assert page.locator(f"#errors-{pipeline_run.pk}").inner_text().endswith("No errors.")

    run = Run.objects.get(name="offline-shop")
    assert run.agent == RULES_NAME
    episodes = list(Episode.objects.filter(run=run).order_by("task_order"))
    assert [e.task_id for e in episodes] == [t.pk for t in approved]
    assert all(e.finished in ("done", "gave_up") and e.end_step and e.status == "recorded" for e in episodes)
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    assert page.locator(".run-agent").inner_text() == RULES_NAME
    ended = page.locator("td.ended").all_inner_texts()
    assert ended == [e.ending.short for e in episodes] and all(" at step " in text for text in ended)
    page.goto(f"{live_server.url}{episodes[0].get_absolute_url()}")
    assert "the rules baseline rules-agent-v1, a heuristic, not a model" in page.locator("#agent-run").inner_text()
    assert page.locator("#ending").inner_text().startswith(f"Ended at step {episodes[0].end_step}")
    reasons = page.locator("#actions .reasoning").all_inner_texts()
    assert reasons and all(text.startswith(SAID) for text in reasons)


def test_the_command_line_refuses_the_scripted_agent_and_attempts_with_the_rules_baseline(approved, settings,
                                                                                        capsys):
    tasks_file = settings.DATA_ROOT / "approved-cli.jsonl"
    call_command("taskgen", "approved-tasks", "--sites", "shop", "--out", str(tasks_file), stdout=io.StringIO())
    err = io.StringIO()
    with pytest.raises(SystemExit) as refused:
        call_command("taskgen", "attempt", "--tasks", str(tasks_file), "--agent", "scripted", "--name", "cli-s",
                     "--inline", stdout=io.StringIO(), stderr=err)
    assert refused.value.code == 2 and not PipelineRun.objects.filter(stage="attempt").exists()
    assert "the scripted agent can attempt none of these 2 task(s)" in err.getvalue()
    assert "Agents that can attempt them all: rules" in err.getvalue()

    out = io.StringIO()
    call_command("taskgen", "attempt", "--tasks", str(tasks_file), "--agent", "rules", "--name", "cli-rules",
                 "--inline", stdout=out, stderr=io.StringIO())  # exit 0: no SystemExit
    line = out.getvalue().strip().splitlines()[-1]
    assert line.startswith("run 'cli-rules' (id ")
    assert ": 2 episodes (0 failed to run); no verifier checked them (ended: " in line
    assert Run.objects.get(name="cli-rules").episodes.filter(status="recorded").count() == 2


def test_a_task_the_agent_cannot_attempt_is_a_failed_episode_with_its_reason_tried_once(approved, settings):
    human = copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == "sb-shop-001"))
    proposed = {"task_id": approved[0].task_id, "site": "shop", "instruction": approved[0].instruction,
                "start_path": "/sites/shop/", "task_kind": approved[0].task_kind}
    tasks_file = settings.DATA_ROOT / "mixed.jsonl"
    tasks_file.parent.mkdir(parents=True, exist_ok=True)
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in (human, proposed)),
                          encoding="utf-8")
    pipeline_run = run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": "scripted",
                                                      "name": "mixed", "mistakes": 0})
    assert "the scripted agent cannot attempt 1 of these 2 tasks" in pipeline_run.params["reach_note"]
    _work_in_thread(pipeline_run.pk)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 2, 0), pipeline_run.errors
    assert pipeline_run.errors == []  # an outcome, not an error
    unit = pipeline_run.units.get(key=proposed["task_id"])
    assert unit.attempts == 1 and unit.result["finished"] == "cannot_attempt"  # never tried again
    episode = Episode.objects.get(run__name="mixed", task__task_id=proposed["task_id"])
    assert (episode.status, episode.finished, episode.end_step) == ("failed", "cannot_attempt", 0)
    assert "has no known solution for the scripted agent" in episode.end_reason
    assert episode.ending.short == "cannot attempt" and pipeline_run.result["failed"] == 1
    assert pipeline_run.result["endings"] == {"cannot attempt": 1, "done": 1}


def test_the_rules_baseline_is_the_same_given_its_seed_and_says_it_is_a_baseline(live_server, approved):
    task = copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == "sb-mail-016"))
    runs = [episode_run(task=task, agent=RulesAgent(seed=7), base_url=live_server.url) for _ in range(2)]
    assert runs[0].actions == runs[1].actions and runs[0].finished == runs[1].finished
    assert runs[0].verifier["ok"] and runs[0].agent == RULES_NAME  # a task it can do: delete an email
    assert all(step["reasoning"].startswith(SAID) for step in runs[0].agent_steps)
    assert runs[0].agent_run["baseline"] is True and runs[0].agent_run["cost_usd"] == "0"
    off = episode_run(task={**task, "task_id": "off-1", "site": "example.com"}, agent=RulesAgent(),
                      base_url=live_server.url)
    assert off.finished == "cannot_attempt" and "not a sandbox site" in off.end_reason and off.error == ""
