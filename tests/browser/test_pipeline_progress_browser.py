"""The pipeline page in a real Chromium: the progress bar follows the run through htmx and stops polling at the end."""
from __future__ import annotations

import os
import shutil

import pytest

from taskgen.models import PipelineRun
from tests.factories import UserFactory

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser(monkeypatch):
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail(f"TASKGEN_REQUIRE_BROWSER is set but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the ORM calls the test makes are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def admin_page(browser, live_server, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="ada", role="admin")
    page = browser.new_page()
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
    admin_page.wait_for_function(f"document.querySelector('#progress-{pr.pk} progress').value == 7", timeout=10_000)
    PipelineRun.objects.filter(pk=pr.pk).update(done=10, status="done")
    status = f"document.querySelector('#progress-{pr.pk} .pill').innerText.trim()"
    admin_page.wait_for_function(f"{status} == 'done'", timeout=10_000)
    admin_page.wait_for_timeout(200)  # lets Playwright deliver the request events so far
    seen = len(polls)
    admin_page.wait_for_timeout(5000)  # two polling periods: none may come once the run has ended
    assert len(polls) == seen and seen >= 2
    assert admin_page.locator(f"#progress-{pr.pk} progress").get_attribute("value") == "10"
