"""The pipeline page in a real Chromium: the progress bar follows the run through htmx and stops polling at the end."""
from __future__ import annotations

import pytest

from taskgen.models import PipelineRun
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin_page(chromium_browser, live_server):
    UserFactory(username="ada", role="admin")
    page = chromium_browser.new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()
    return page


def test_the_progress_bar_moves_and_polling_stops_when_the_run_ends(admin_page, live_server):
    pr = PipelineRun.objects.create(stage="export", status="running", total=10, done=3)
    polls = []
    admin_page.on("request", lambda r: polls.append(r.url) if "/progress/" in r.url else None)
    admin_page.goto(f"{live_server.url}{pr.get_absolute_url()}")
    assert admin_page.locator(f"#progress-{pr.pk} progress").get_attribute("value") == "3"

    PipelineRun.objects.filter(pk=pr.pk).update(done=7)
    # Arrow functions, not bare expressions: Playwright evals a bare one in the page, which the CSP refuses.
    admin_page.wait_for_function(f"() => document.querySelector('#progress-{pr.pk} progress').value == 7",
                                 timeout=10_000)
    PipelineRun.objects.filter(pk=pr.pk).update(done=10, status="done")
    status = f"document.querySelector('#progress-{pr.pk} .pill').innerText.trim()"
    admin_page.wait_for_function(f"() => {status} == 'done'", timeout=10_000)
    admin_page.wait_for_timeout(200)  # lets Playwright deliver the request events so far
    seen = len(polls)
    admin_page.wait_for_timeout(5000)  # two polling periods: none may come once the run has ended
    assert len(polls) == seen and seen >= 2
    assert admin_page.locator(f"#progress-{pr.pk} progress").get_attribute("value") == "10"


def test_cancel_goes_and_the_result_summary_comes_when_the_run_ends_while_watched(admin_page, live_server):
    pr = PipelineRun.objects.create(stage="export", status="running", total=2, done=1)
    admin_page.goto(f"{live_server.url}{pr.get_absolute_url()}")
    assert admin_page.locator(f"#actions-{pr.pk} button").inner_text() == "Cancel"
    assert admin_page.locator(f"#result-{pr.pk} h2").count() == 0

    PipelineRun.objects.filter(pk=pr.pk).update(done=2, status="done", result={"episodes": 2, "steps": 17})
    admin_page.wait_for_function(f"() => document.querySelector('#result-{pr.pk} h2') !== null", timeout=15_000)
    assert admin_page.locator(f"#actions-{pr.pk} button").count() == 0
    assert admin_page.locator(f"#result-{pr.pk} table").inner_text().split() == ["episodes", "2", "steps", "17"]


def test_the_errors_come_with_the_failed_count_while_the_page_is_watched(admin_page, live_server, settings,
                                                                         monkeypatch):
    """The live page showed "1 failed" beside "Errors: No errors." until a reload: the errors are swapped in with
    the counts. A real run on the engine: an external harness that exits 3, worked in a thread while the page
    polls."""
    import json
    import threading

    from django.db import connection

    from sandbox.catalog import sandbox_tasks
    from taskgen.engine.control import run_start
    from taskgen.engine.worker import work
    from tests.test_external_harness import COMMAND

    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: None)  # worked here, below
    settings.EXTERNAL_HARNESSES_JSON, settings.EXTERNAL_HARNESS_SECONDS = json.dumps({"mini": COMMAND}), 60
    tasks = settings.DATA_ROOT / "live.jsonl"
    tasks.parent.mkdir(parents=True, exist_ok=True)
    tasks.write_text(json.dumps(sandbox_tasks()[0]) + "\n", encoding="utf-8")
    pr = run_start(stage="attempt", params={"tasks_file": str(tasks), "agent": "external:mini", "name": "live",
                                            "agent_options": {"arm": "fail"}})
    admin_page.goto(f"{live_server.url}{pr.get_absolute_url()}")
    assert admin_page.locator(f"#errors-{pr.pk}").inner_text().split("\n")[-1] == "No errors."

    def worker() -> None:
        try:
            work(pipeline_run_id=pr.pk, owner="live-test")
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=60)
    counts = f"document.querySelector('#progress-{pr.pk} .counts')"
    admin_page.wait_for_function(f"() => {counts} && {counts}.innerText.includes('1 failed')", timeout=15_000)
    errors = admin_page.locator(f"#errors-{pr.pk}").inner_text()
    assert "No errors." not in errors and "the harness mini exited with code 3" in errors
    assert "&lt;b&gt;" not in errors and "episode 29: <b>error</b> line" in errors  # escaped, shown as text


def test_the_progress_cell_holds_its_status_bar_and_counts_on_the_pipeline_list(admin_page, live_server):
    """Seen on the pipeline list of `make demo`: each run's progress box was 8 px high with a grey track behind it
    (a leftover rule for an older bar), so its status pill, bar and counts spilled over its edges."""
    pr = PipelineRun.objects.create(stage="export", status="done", total=31, done=31)
    admin_page.goto(f"{live_server.url}/pipeline/")
    box = admin_page.locator(f"#progress-{pr.pk}").bounding_box()
    for part in (".pill", "progress", ".counts"):
        inner = admin_page.locator(f"#progress-{pr.pk} {part}").bounding_box()
        assert box["y"] <= inner["y"] and inner["y"] + inner["height"] <= box["y"] + box["height"] + 0.5, part
