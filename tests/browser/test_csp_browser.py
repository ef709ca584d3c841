"""Real pages in a real Chromium under the app's Content-Security-Policy: not one violation in the console."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from review.services import label_set, queues_builtin_ensure
from taskgen.blobs import blob_store_image
from taskgen.models import Screenshot
from tests.factories import EpisodeFactory, JudgeConfigFactory, RunFactory, SiteFactory, UserFactory
from tests.validate_data import make_cells

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(buf, "PNG")
    return buf.getvalue()


def _pages_worth_visiting() -> list[str]:
    run = RunFactory(name="csp-run")
    config = JudgeConfigFactory()
    episodes = make_cells(run=run, config=config, site=SiteFactory(slug="shop"), tp=3, fp=2, fn=1, tn=2)
    Screenshot.objects.create(episode=episodes[0], step=0, name="step_0.png", blob=blob_store_image(data=_png()))
    admin = UserFactory(username="csp-admin", role="admin")
    label_set(episode=episodes[0], reviewer=admin, verdict="SUCCESS")
    queues_builtin_ensure()
    other = EpisodeFactory(run=run)
    return ["/", run.get_absolute_url(), episodes[0].get_absolute_url(), other.get_absolute_url(), "/queues/",
            "/validate/", "/adjudication/", "/reviewers/", "/pipeline/", "/exports/", "/sites/", "/admin/"]


def test_every_page_runs_under_the_csp_without_a_violation(page, live_server):
    paths = _pages_worth_visiting()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{page.url}: {m.text}") if (
        "Content Security Policy" in m.text or m.type == "error") else None)
    page.on("pageerror", lambda e: problems.append(f"{page.url}: {e}"))
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "csp-admin")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "Content-Security-Policy" in {k.title(): v for k, v in response.headers.items()}, path
        page.wait_for_load_state("networkidle")
    # The sandbox sites, in a session minted for this browser, styled by their static stylesheet.
    page.goto(f"{live_server.url}/sites/")
    page.click("form[action$='/sites/enter/'] button")
    for path in ("/sites/shop/", "/sites/mail/", "/sites/booking/"):
        page.goto(f"{live_server.url}{path}")
        assert page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex", path
    # The workbench's keyboard and htmx still work: a label posted with the keyboard swaps in.
    page.goto(f"{live_server.url}{paths[3]}")
    page.keyboard.press("2")
    page.locator(".my-verdict", has_text="Not success").wait_for()
    assert not problems, "\n".join(problems)
