"""Browser tests drive a real headless Chromium (Debian's /usr/bin/chromium) through Playwright's sync API.

They skip only when Chromium is missing and TASKGEN_REQUIRE_BROWSER is unset; CI sets it, so there they fail.
"""
from __future__ import annotations

import os
import shutil

import pytest

# pytest-django's live_server runs beside Playwright's sync API, whose event loop makes Django refuse sync ORM calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("TASKGEN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


# Module scope: Playwright's sync API owns an event loop while it runs, and the harness tests start their own.
@pytest.fixture(scope="module")
def chromium_browser():
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail(f"Chromium not found at {CHROMIUM} and TASKGEN_REQUIRE_BROWSER is set")
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium_browser):
    context = chromium_browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()
