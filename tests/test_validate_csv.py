"""The validate CSV: numbers stay numbers (negative kappas included); only formula-like text is guarded."""
from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.urls import reverse

from review.views.validate import csv_cell
from tests.factories import JudgeConfigFactory, RunFactory, SiteFactory
from tests.validate_data import make_cells


@pytest.mark.parametrize("value, cell", [
    (-0.016, "-0.016"), (-1, "-1"), (0.0, "0.0"), (Decimal("-0.5"), "-0.5"), (3, "3"), (None, ""),
    ("=HYPERLINK(1)", "'=HYPERLINK(1)"), ("-shop", "'-shop"), ("+1", "'+1"), ("@sum", "'@sum"), ("shop", "shop"),
])
def test_only_text_cells_are_guarded(value, cell):
    assert csv_cell(value) == cell


@pytest.mark.django_db
def test_a_negative_kappa_is_written_as_a_number(viewer_client):
    run, config = RunFactory(), JudgeConfigFactory()
    # the judge says the opposite of the verifier more often than not: kappa below zero
    make_cells(run=run, config=config, site=SiteFactory(slug="-dash-site"), tp=1, fp=3, fn=3, tn=1)
    response = viewer_client.get(reverse("review:validate_csv"),
                                 {"runs": [run.pk], "config": config.pk, "against": "verifier"})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    overall = rows[0]
    assert float(overall["kappa"]) < 0 and not overall["kappa"].startswith("'")
    assert float(overall["precision_low"]) >= 0
    assert [r["name"] for r in rows if r["scope"] == "site"] == ["'-dash-site"]
