"""Issue 22, seen 5: the verifier's reason (which check failed; the database holds it) is shown wherever its verdict
appears: the episode page, the run table, the audit queue's "the verifier says otherwise", validate's false
positives; escaped, since a check's words come from an imported tasks file."""
from __future__ import annotations

import pytest
from django.urls import reverse

from review.models import Queue
from review.services import queues_builtin_ensure
from taskgen.models import VerifierResult
from taskgen.triage.risk import risk_reasons
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, SiteFactory, TaskFactory

pytestmark = pytest.mark.django_db
CHECKS = {"parts": [{"part": "the cart holds 2 × <b>Cold Brew</b>", "ok": False},
                    {"part": "the answer states the price", "ok": True}]}
FAILED = "failed “the cart holds 2 × &lt;b&gt;Cold Brew&lt;/b&gt;”"


@pytest.fixture
def false_positive():
    """A judged success the sandbox verifier failed on one of its two checks."""
    run = RunFactory(name="sandbox-demo")
    episode = EpisodeFactory(run=run, task=TaskFactory(site=SiteFactory(slug="shop"), task_kind="action"),
                             data_changes=[{"collection": "cart", "op": "create"}])
    JudgmentFactory(episode=episode, config=JudgeConfigFactory(), verdict="SUCCESS")
    VerifierResult.objects.create(episode=episode, ok=False, source="sandbox", detail=CHECKS)
    return episode


def test_the_reason_names_the_failed_checks_or_nothing_when_the_source_names_none():
    assert VerifierResult.reason_of(False, CHECKS) == "failed “the cart holds 2 × <b>Cold Brew</b>”"
    assert VerifierResult.reason_of(True, {"parts": [{"part": "a", "ok": True}]}) == "passed its 1 check"
    assert VerifierResult.reason_of(False, {}) == "" and VerifierResult.reason_of(None, None) == ""
    assert VerifierResult.reason_of(False, {"parts": [], "error": "the page did not load"}) == \
        "could not run: the page did not load"
    assert VerifierResult.reason_of(False, {"parts": "junk"}) == ""


def test_the_episode_page_shows_which_check_failed_escaped(reviewer_client, false_positive):
    html = reviewer_client.get(false_positive.get_absolute_url()).content.decode()
    assert FAILED in html and "<b>Cold Brew</b>" not in html
    assert "✗ failed</span> the cart holds" in html and "✓ passed</span> the answer states the price" in html


def test_a_verifier_that_names_no_check_says_so(reviewer_client, false_positive):
    VerifierResult.objects.filter(episode=false_positive).update(source="results.jsonl", detail={})
    html = reviewer_client.get(false_positive.get_absolute_url()).content.decode()
    assert "from results.jsonl (it names no check)" in html


def test_the_run_table_shows_the_failed_check(reviewer_client, false_positive):
    html = reviewer_client.get(false_positive.run.get_absolute_url()).content.decode()
    assert FAILED in html and "<b>Cold Brew</b>" not in html


def test_the_audit_queue_says_which_check_the_verifier_failed(reviewer_client, false_positive):
    assert risk_reasons([false_positive.pk], None)[false_positive.pk] == [
        "the verifier says otherwise: it failed “the cart holds 2 × <b>Cold Brew</b>”"]
    queues_builtin_ensure()
    audit = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=false_positive.run)
    html = reviewer_client.get(audit.get_absolute_url()).content.decode()
    assert f"the verifier says otherwise: it {FAILED}" in html and "<b>Cold Brew</b>" not in html


def test_validates_false_positives_name_the_failed_check(viewer_client, false_positive):
    query = {"runs": [false_positive.run.pk], "against": "verifier"}
    html = viewer_client.get(reverse("review:validate"), query).content.decode()
    assert FAILED in html
    body = viewer_client.get(reverse("review:validate_json"), query).json()
    assert body["false_positives"][0]["verifier"] == "failed “the cart holds 2 × <b>Cold Brew</b>”"
