"""What the agent was given at each step (issue 23, item 8), in a real Chromium: the episode page showed only the
final screen's text; now each step has the page address, the numbered elements and the page text the agent read,
collapsed until opened, escaped, for every agent kind the harness runs (the scripted simulation and a model agent
here), and for a harness of one's own that records them in grade_inputs.json."""
from __future__ import annotations

import copy
import json

import pytest

from sandbox.catalog import sandbox_tasks
from taskgen.harness.agents import ScriptedAgent
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.harness.episode import episode_run
from taskgen.harness.model_agent import ModelAgent
from taskgen.harness.rundir import episode_write
from taskgen.models import Episode
from taskgen.stages.import_.service import import_run_dir
from tests.agent_policy import SolutionPolicy
from tests.browser.test_workbench_truth import _log_in
from tests.fakes.openai_server import FakeOpenAI
from tests.rundirs import png

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


def _imported(record, task: dict, run_dir, name: str) -> Episode:
    episode_write(record=record, run_dir=run_dir)
    (run_dir / "tasks.jsonl").write_text(json.dumps(task, ensure_ascii=False) + "\n", encoding="utf-8")
    import_run_dir(run_dir=run_dir, tasks_file=run_dir / "tasks.jsonl", name=name)
    return Episode.objects.get(run__name=name, task__task_id=task["task_id"])


def _task(task_id: str) -> dict:
    return copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == task_id))


def _open_step(page, number: int) -> str:
    view = page.locator(f"#given-{number}")
    assert view.evaluate("el => el.open") is False  # collapsed by default
    assert not page.locator(f"#given-{number} .given-elements").is_visible()
    page.locator(f"#given-{number} summary").click()
    assert view.evaluate("el => el.open") is True and page.locator(f"#given-{number} .given-elements").is_visible()
    return page.locator(f"#given-{number}").inner_text()


def test_the_scripted_agents_view_of_each_step_is_on_the_page_collapsed(page, live_server, tmp_path):
    task = _task("sb-shop-017")
    record = episode_run(task=task, agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == "" and len(record.observations) == len(record.actions)
    episode = _imported(record, task, tmp_path / "run", "scripted")
    _log_in(page, live_server, "viewer-x", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    assert page.locator("details.agent-view").count() == len(record.actions)
    first = _open_step(page, 1)
    assert "What the agent was given at step 1" in first and "/sites/shop/" in first
    assert record.observations[0]["elements"][0] in first  # the numbered elements, as the rows list them
    second = _open_step(page, 2)
    assert record.observations[1]["text"][:60].split("\n")[0] in second  # the page's text at step 2


def test_a_model_agents_view_is_the_capped_list_and_text_it_was_prompted_with(page, live_server, tmp_path, settings):
    settings.AGENT_MAX_ELEMENTS, settings.AGENT_TEXT_CHARS = 5, 120
    server = FakeOpenAI().start()
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL, settings.OPENAI_API_KEY = server.base_url, "qwen-test", ""
    task = _task("sb-shop-001")
    server.answer = SolutionPolicy(task)
    try:
        record = episode_run(task=task, agent=ModelAgent(provider="openai-compatible"), base_url=live_server.url)
    finally:
        server.stop()
    given = record.observations[0]
    prompt = record.agent_steps[0]["prompt"]
    assert len(given["text"]) <= 120 and given["text"] in prompt
    assert len(given["elements"]) == 6 and all(line in prompt for line in given["elements"])  # 5 and "n more"
    episode = _imported(record, task, tmp_path / "run", "model")
    _log_in(page, live_server, "viewer-y", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    shown = _open_step(page, 1)
    assert given["elements"][0] in shown and "more elements further down are not listed" in shown


def test_a_recorded_view_from_another_harness_is_shown_escaped(page, live_server, tmp_path):
    run_dir = tmp_path / "ext"
    ep = run_dir / "ext-001"
    (ep / "screenshots").mkdir(parents=True)
    (ep / "screenshots" / "step_1.png").write_bytes(png())
    hostile = '<img src=x onerror="document.title=\'pwned\'">'
    grade = {"actions": [{"click": {"index": 0}}], "answer": "", "log": [], "changes": [], "seen": ["page"],
             "observations": [{"step": 1, "url": "http://example.test/<b>", "title": hostile,
                               "elements": [f'[0] button "{hostile}"'], "text": f"Hello {hostile}"}]}
    (ep / "grade_inputs.json").write_text(json.dumps(grade), encoding="utf-8")
    task = {"task_id": "ext-001", "site": "example", "instruction": "Press the button on the page.",
            "task_kind": "action"}
    (run_dir / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    import_run_dir(run_dir=run_dir, tasks_file=run_dir / "tasks.jsonl", name="ext")
    episode = Episode.objects.get(run__name="ext")
    _log_in(page, live_server, "viewer-z", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    shown = _open_step(page, 1)
    assert hostile in shown and f"Hello {hostile}" in shown  # as text, not as an element
    assert page.locator("#given-1 img").count() == 0 and page.title() != "pwned"
