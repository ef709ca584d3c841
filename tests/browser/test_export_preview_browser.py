"""The export form in a real Chromium: choosing a run shows, before anything is written, what the export would leave
out and why (htmx posts the form's values to the preview, under the page's CSP and CSRF header)."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from taskgen.models import Export
from tests.factories import UserFactory
from tests.test_export_left_out import judged_run_make

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_choosing_a_run_shows_what_the_export_leaves_out(page, live_server):
    run = judged_run_make(Path(settings.DATA_ROOT))
    UserFactory(username="ada", role="admin")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/pipeline/")
    page.click("#start-export summary")
    page.select_option("#start-export select[name=run]", str(run.pk))
    preview = page.locator("#export-preview")
    preview.get_by_text("6 judged successes: 2 exported").wait_for()
    assert "reviewers labelled it Not success" in preview.inner_text()
    page.check("#start-export input[name=include_verifier_failed]")
    preview.get_by_text("6 judged successes: 3 exported").wait_for()
    assert Export.objects.count() == 0
