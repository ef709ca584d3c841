"""Issue 13's Done-when in a real Chromium: an admin proposes tasks for the three sandbox sites with the rules
proposer from the Pipeline page, approves some on a site's Tasks page with the keyboard, and starts an attempt run
on exactly the approved ones (the run's units are worked here: the live server has no Celery worker)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskgen.engine.worker import work
from taskgen.models import PipelineRun, Task
from tests import propose_helpers
from tests.factories import UserFactory

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin_page(chromium_browser, live_server):
    UserFactory(username="ada", role="admin")
    page = chromium_browser.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()
    return page


def test_propose_review_and_attempt_exactly_the_approved_tasks(admin_page, live_server, sandbox_sites, settings):
    admin_page.goto(f"{live_server.url}/pipeline/")
    admin_page.click("#start-propose summary")
    admin_page.select_option("#start-propose select[name=sites]", ["booking", "mail", "shop"])
    admin_page.fill("#start-propose input[name=per_site]", "5")
    admin_page.fill("#start-propose input[name=batch]", "5")
    admin_page.select_option("#start-propose select[name=provider]", "rules")
    admin_page.click("#start-propose button[type=submit]")
    admin_page.wait_for_url("**/pipeline/*/")
    pipeline_run = PipelineRun.objects.get(stage="propose")
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    admin_page.reload()
    assert "15" in admin_page.locator(".result-summary").inner_text()
    assert Task.objects.filter(review_state="proposed").count() == 15

    admin_page.goto(f"{live_server.url}/tasks/site/shop/")
    for key in ("j", "x", "j", "j", "x"):  # the first and third tasks
        admin_page.keyboard.press(key)
    admin_page.keyboard.press("a")
    admin_page.wait_for_load_state()
    admin_page.wait_for_selector("text=Approve: 2 of 2 tasks changed.")
    shop = list(Task.objects.filter(site__slug="shop").order_by("created_at", "pk"))
    approved = [shop[0], shop[2]]
    assert [t.review_state for t in shop] == ["approved", "proposed", "approved", "proposed", "proposed"]
    assert "<script" not in admin_page.locator("table.tasks").inner_html().replace("</script>", "")

    admin_page.goto(f"{live_server.url}/tasks/")
    admin_page.select_option("#id_sites", ["shop"])
    admin_page.fill("#id_name", "approved-shop")
    admin_page.fill("#id_mistakes", "0")
    admin_page.click("form[action$='/attempt-approved/'] button[type=submit]")
    admin_page.wait_for_url("**/pipeline/*/")
    attempt = PipelineRun.objects.get(stage="attempt")
    lines = Path(attempt.params["tasks_file"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == [t.task_id for t in approved]
    assert attempt.total == 2
