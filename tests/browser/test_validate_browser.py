"""The validate page in a real Chromium: charts drawn, a false positive one click away, a readable saved PDF."""
from __future__ import annotations

import pytest

from tests.factories import JudgeConfigFactory, RunFactory, SiteFactory, UserFactory
from tests.validate_data import make_cells, make_episode

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def logged_in_page(chromium_browser, live_server, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    UserFactory(username="vera", role="viewer")
    page = chromium_browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "vera")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_load_state()
    return page


def test_a_false_positive_is_one_click_away_and_the_page_saves_as_pdf(logged_in_page, live_server, tmp_path):
    run, site = RunFactory(name="sandbox-human"), SiteFactory(slug="shop")
    config = JudgeConfigFactory(provider="rules", model="rules-v1")
    make_cells(run=run, config=config, site=site, tp=4, fn=1, tn=3)
    false_positive = make_episode(run=run, site=site, truth=False, verdict="SUCCESS", config=config)
    page = logged_in_page
    page.goto(f"{live_server.url}/validate/")
    assert page.locator("svg.chart rect.cell").count() == 4
    assert page.locator("svg.chart g.precision circle").count() == 1  # one site: its precision marker
    assert "offline baseline" in page.inner_text("main")
    page.click(f"text={false_positive.task.task_id}")
    page.wait_for_url(f"**{false_positive.get_absolute_url()}")
    assert false_positive.task.instruction in page.inner_text("main")

    page.go_back()
    page.emulate_media(media="print")
    assert not page.locator("form.validate-form").is_visible()  # controls are left out of the PDF
    assert page.locator("svg.chart").first.bounding_box()["width"] > 200
    pdf = tmp_path / "validate.pdf"
    page.pdf(path=str(pdf))
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 10_000
