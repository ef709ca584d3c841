"""The runs pages' rough edges (issue 15, item 11): nothing to judge, no Cancel once finished, a result summary,
durations in s/min/h, the judge and export forms' defaults, and a side by side with itself refused."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from review.pipeline_summary import duration_words, result_rows
from taskgen.models import PipelineRun
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, SiteFactory
from tests.validate_data import make_cells

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def judge_here(monkeypatch):
    """Workers sent for a judge run do its work at once, in this process."""
    from taskgen.engine.worker import work

    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async",
                        lambda args, **kwargs: work(pipeline_run_id=args[0], owner="test"))


def _judge(client, run, capture) -> tuple:
    form = {"run": run.pk, "provider": "rules", "prompt_version": "judge-v1", "image_policy": "default"}
    with capture(execute=True):
        response = client.post(reverse("review:pipeline_start", args=["judge"]), form, follow=True)
    return response, PipelineRun.objects.order_by("-pk").first()


def test_judging_an_already_judged_run_says_nothing_to_judge_and_adds_no_run(admin_client_role, judge_here,
                                                                            django_capture_on_commit_callbacks):
    run = RunFactory(name="judged-run")
    EpisodeFactory.create_batch(2, run=run)
    _, first = _judge(admin_client_role, run, django_capture_on_commit_callbacks)
    assert first.status == "done" and first.total == 2
    response, again = _judge(admin_client_role, run, django_capture_on_commit_callbacks)
    page = response.content.decode()
    assert again.pk == first.pk and PipelineRun.objects.count() == 1  # no empty run listed
    assert "Nothing to judge: every recorded episode of judged-run has a verdict under rules:" in page
    assert "Started judge" not in page and "of ?" not in page and "0 done" not in page
    listing = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert "Nothing to judge" not in listing and "of ?" not in listing


def test_a_finished_run_shows_its_result_summary_and_no_cancel(admin_client_role):
    run = RunFactory(name="shop-run")
    pr = PipelineRun.objects.create(stage="judge", status="done", run=run, total=2, done=2,
                                    result={"episodes": 2, "success": 1, "rate": 0.5, "judge": "rules-v2",
                                            "run_id": run.pk})
    page = admin_client_role.get(pr.get_absolute_url()).content.decode()
    assert ">Cancel<" not in page and "<h2>Result</h2>" in page
    assert re.search(r"<th>success</th><td>1</td>", page) and re.search(r"<th>judge</th><td>rules-v2</td>", page)
    assert f'<a href="{run.get_absolute_url()}">run #{run.pk}</a>' in page


def test_the_progress_poll_drops_cancel_and_brings_the_summary_when_the_run_ends(admin_client_role):
    pr = PipelineRun.objects.create(stage="export", status="running", total=3, done=1, started_at=timezone.now())
    url = reverse("review:pipeline_progress", args=[pr.pk]) + "?detail=1"
    running = admin_client_role.get(url)
    assert running.status_code == 200 and ">Cancel<" in running.content.decode()
    PipelineRun.objects.filter(pk=pr.pk).update(status="done", done=3, finished_at=timezone.now(),
                                                result={"export_id": 41, "manifest": {"episodes": ["x"] * 3}})
    finished = admin_client_role.get(url)
    body = finished.content.decode()
    assert finished.status_code == 286 and ">Cancel<" not in body
    assert f'id="actions-{pr.pk}" hx-swap-oob="true"' in body and f'id="result-{pr.pk}" hx-swap-oob="true"' in body
    assert 'href="/exports/41/">export #41</a>' in body and "manifest" not in body
    listing_poll = admin_client_role.get(reverse("review:pipeline_progress", args=[pr.pk])).content.decode()
    assert f'id="actions-{pr.pk}"' in listing_poll and f'id="result-{pr.pk}"' not in listing_poll


def test_a_run_stopped_early_says_it_left_no_summary(admin_client_role):
    pr = PipelineRun.objects.create(stage="export", status="cancelled", finished_at=timezone.now())
    page = admin_client_role.get(pr.get_absolute_url()).content.decode()
    assert "This run left no summary (it cancelled before the end)." in page and ">Resume<" in page


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0.0 s"), (0.42, "0.4 s"), (9.94, "9.9 s"), (42.4, "42 s"), (60, "1 min"), (192, "3 min 12 s"),
    (3599.6, "1 h"), (7500, "2 h 5 min"), (-1, "0.0 s")])
def test_durations_read_in_seconds_minutes_and_hours(seconds, words):
    assert duration_words(seconds) == words


def test_a_resumed_run_s_duration_leaves_out_the_time_it_sat_cancelled(admin_client_role):
    from taskgen.engine.control import run_resume
    from taskgen.models import WorkUnit

    now = timezone.now()
    pr = PipelineRun.objects.create(stage="export", status="cancelled", total=1, started_at=now - timedelta(hours=3),
                                    finished_at=now - timedelta(hours=3) + timedelta(seconds=20))
    WorkUnit.objects.create(pipeline_run=pr, key="1", status="cancelled")
    run_resume(pipeline_run=pr)  # worked 20 s, then sat cancelled for nearly 3 hours
    PipelineRun.objects.filter(pk=pr.pk).update(status="done", done=1, finished_at=timezone.now() + timedelta(
        seconds=25))  # then took 25 s more
    page = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert "took 45 s" in page and " h" not in re.search(r'class="muted duration">[^<]*', page).group(0)


def test_a_short_run_never_says_it_took_zero_minutes(admin_client_role):
    start = timezone.now() - timedelta(hours=1)
    quick = PipelineRun.objects.create(stage="export", status="done", started_at=start,
                                       finished_at=start + timedelta(seconds=4.25), total=1, done=1)
    slow = PipelineRun.objects.create(stage="export", status="done", started_at=start,
                                      finished_at=start + timedelta(minutes=75), total=1, done=1)
    listing = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert "took 4.2 s" in listing and "took 1 h 15 min" in listing and "minutes" not in listing
    assert "took 4.2 s" in admin_client_role.get(quick.get_absolute_url()).content.decode()
    assert "took 1 h 15 min" in admin_client_role.get(slow.get_absolute_url()).content.decode()


def test_result_rows_spell_out_short_values_count_lists_of_records_and_leave_out_nested_ones():
    rows = result_rows({"episodes": 3, "skipped": [{"path": "a"}], "per_site": {"shop": {"tp": 1}},
                        "complete": True, "runs": ["shop-run", "mail-run"], "reviewer": None,
                        "figures": {"precision": 0.75, "fp": 2, "kappa": None}, "ids": list(range(40))})
    assert [(r.name, r.value) for r in rows] == [
        ("complete", "yes"), ("episodes", "3"), ("figures", "fp 2 · kappa — · precision 0.75"), ("ids", "40 items"),
        ("runs", "shop-run, mail-run"), ("skipped", "1 item")]


def _model_input(page: str) -> str:
    return re.search(r'<input[^>]*name="model"[^>]*>', page).group(0)


def test_the_judge_form_does_not_prefill_a_gemini_model_for_the_rules_provider(admin_client_role, settings):
    settings.JUDGE_PROVIDER, settings.JUDGE_MODEL = "rules", "gemini-3.5-flash"
    page = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert re.search(r'<option value="rules"[^>]* selected>', page)
    assert re.search(r'<option value="" selected>the provider&#x27;s default</option>', page)  # images too
    assert "value=" not in _model_input(page) and "gemini-3.5-flash" not in _model_input(page)


def test_a_model_typed_for_the_rules_provider_is_not_kept(admin_client_role, judge_here,
                                                         django_capture_on_commit_callbacks):
    run = RunFactory()
    EpisodeFactory(run=run)
    form = {"run": run.pk, "provider": "rules", "model": "gemini-3.5-flash", "prompt_version": "judge-v1",
            "image_policy": "default"}
    with django_capture_on_commit_callbacks(execute=True):
        admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), form)
    pr = PipelineRun.objects.get()
    assert pr.params["judge"].startswith("rules:") and pr.params["started_with"]["model"] == ""


def _judge_config_select(page: str) -> str:
    return re.search(r'<select name="judge_config".*?</select>', page, re.S).group(0)


def test_the_export_form_preselects_the_only_judge_config(admin_client_role):
    only = JudgeConfigFactory(provider="rules", model="rules-v2")
    select = _judge_config_select(admin_client_role.get(reverse("review:pipeline_list")).content.decode())
    assert f'value="{only.pk}" selected' in select
    JudgeConfigFactory(provider="gemini", model="gemini-3.5-flash")
    select = _judge_config_select(admin_client_role.get(reverse("review:pipeline_list")).content.decode())
    assert "selected" not in select.replace('value="" selected', "")


def test_the_export_form_uses_a_run_s_only_judge_config_when_another_run_has_two(admin_client_role):
    """Two configs in the database, so the form cannot preselect one; the run was judged by one of them only."""
    from taskgen.models import Export

    rules, gemini = JudgeConfigFactory(provider="rules", model="rules-v2"), JudgeConfigFactory(model="gemini-x")
    once, twice = RunFactory(name="once"), RunFactory(name="twice")
    make_cells(run=once, config=rules, site=SiteFactory(slug="shop"), tp=2)
    for episode in make_cells(run=twice, config=rules, site=SiteFactory(slug="mail"), tp=1):
        JudgmentFactory(episode=episode, config=gemini, verdict="SUCCESS")
    form = {"source": "judge", "judge_config": "", "budget": 1000, "out_dir": ""}
    preview = admin_client_role.post(reverse("review:export_preview"), {**form, "run": once.pk}, HTTP_HX_REQUEST="true")
    assert f"approved by the verdicts of <code>{rules.key}</code>" in preview.content.decode()
    response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]), {**form, "run": once.pk})
    assert response.status_code == 302 and Export.objects.get().judge_config == rules
    refused = admin_client_role.post(reverse("review:pipeline_start", args=["export"]), {**form, "run": twice.pk})
    page = refused.content.decode()
    assert refused.status_code == 400 and "run twice has verdicts of 2 judge configs" in page and gemini.key in page


@pytest.fixture
def judged_twice():
    run = RunFactory(name="twice")
    gemini = JudgeConfigFactory(provider="gemini", model="gemini-3.5-flash", prompt_version="v1")
    make_cells(run=run, config=gemini, site=SiteFactory(slug="shop"), tp=2, fp=1, tn=1, cost="0.001")
    return run, gemini


@pytest.mark.parametrize("config_chosen", [True, False], ids=["config-chosen", "most-used-config"])
def test_a_side_by_side_with_the_same_config_is_refused_with_a_reason(viewer_client, judged_twice, config_chosen):
    run, gemini = judged_twice
    query = {"runs": [run.pk], "compare": gemini.pk, "against": "verifier"}
    if config_chosen:
        query["config"] = gemini.pk
    page = viewer_client.get(reverse("review:validate"), query).content.decode()
    assert "Choose a different config to compare with." in page
    assert "Side by side on the same episodes" not in page


def _admin_judge(client, run):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.filter(username="root").first()
    client.force_login(root or get_user_model().objects.create_superuser("root", "", "pw-for-tests"))
    return client.post(reverse("admin:taskgen_run_changelist"),
                       {"action": "judge_runs", "_selected_action": [run.pk]}, follow=True).content.decode()


def test_the_admin_judges_with_the_provider_s_own_default_model_and_says_when_nothing_is_left(
        client, settings, judge_here, django_capture_on_commit_callbacks):
    settings.JUDGE_PROVIDER, settings.JUDGE_MODEL = "openai-compatible", "gemini-3.5-flash"
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = "http://127.0.0.1:9/v1", "Qwen/Qwen3.5-4B"
    settings.JUDGE_IMAGE_POLICY = "medium"  # Gemini's media_resolution: the openai-compatible judge refuses it
    run = RunFactory(name="admin-judged")
    EpisodeFactory(run=run)
    with django_capture_on_commit_callbacks(execute=False):  # started, not worked: no model server here
        page = _admin_judge(client, run)
    assert "not started" not in page, re.findall(r"not started[^<]*", page)
    judge = PipelineRun.objects.get().params["judge"]
    assert judge.startswith("openai-compatible:Qwen/Qwen3.5-4B:") and judge.endswith(":small"), judge

    settings.JUDGE_PROVIDER = "rules"
    EpisodeFactory(run=run)
    with django_capture_on_commit_callbacks(execute=True):
        _admin_judge(client, run)
    with django_capture_on_commit_callbacks(execute=True):
        page = _admin_judge(client, run)
    assert "Nothing to judge: every recorded episode of admin-judged has a verdict under rules:" in page
    assert "Started" not in page and PipelineRun.objects.filter(stage="judge").count() == 2
