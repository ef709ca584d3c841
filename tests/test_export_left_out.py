"""Issue 22, seen 1: the default export leaves out what reviewers rejected and what the verifier failed, says so
before writing (command and form), and includes them only when asked in so many words."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from review.services import label_set
from review.views.exports import export_choices
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import Export, JudgeConfig, VerifierResult
from taskgen.stages.export.select import ExportError, export_select, left_out_words
from tests.factories import UserFactory
from tests.runfiles import HandTask, load_run_dir, write_run_dir

# Six judged successes with rows (alpha-1..3, beta-1..3), one judged failure (beta-4).
TASKS = [HandTask("alpha", n, rows=2) for n in (1, 2, 3)] + [HandTask("beta", n, rows=1) for n in (1, 2, 3)] + [
    HandTask("beta", 4, rows=3, judged=False)]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def judged_run(settings, db):
    return judged_run_make(Path(settings.DATA_ROOT))


def judged_run_make(data_root: Path):
    """The demo's case in small: a reviewer labelled two judged successes Not success, the verifier failed one
    other and passed another, an adjudicator refused one; a human Success on a judged failure."""
    run_dir, tasks_file = write_run_dir(data_root / "seen1", TASKS)
    run = load_run_dir(run_dir, tasks_file)
    reviewer, adjudicator = UserFactory(role="reviewer"), UserFactory(role="adjudicator")
    episode = {e.task.task_id: e for e in run.episodes.select_related("task")}
    label_set(episode=episode["tg-alpha-1"], reviewer=reviewer, verdict="NOT SUCCESS")
    label_set(episode=episode["tg-beta-2"], reviewer=reviewer, verdict="NOT SUCCESS")
    label_set(episode=episode["tg-beta-4"], reviewer=reviewer, verdict="SUCCESS")
    final_label_adjudicate(episode=episode["tg-beta-3"], adjudicator=adjudicator, verdict="NOT SUCCESS",
                           reason="the answer is wrong")
    VerifierResult.objects.create(episode=episode["tg-alpha-2"], ok=False, source="sandbox")
    VerifierResult.objects.create(episode=episode["tg-alpha-3"], ok=True, source="sandbox")
    return run


def picked(selection) -> list[str]:
    return sorted(c.task_id for c in selection.picked)


@pytest.mark.django_db
def test_the_default_export_leaves_out_reviewer_rejections_and_verifier_failures(judged_run):
    selection = export_select(run=judged_run, judge_config=JudgeConfig.objects.get(), budget=1000)
    assert picked(selection) == ["tg-alpha-3", "tg-beta-1"]
    assert selection.left_out == {"adjudicated": 1, "reviewers": 2, "verifier": 1}
    assert selection.candidates == 2  # _report.json counts only what may be exported
    assert selection.left_out_words() == (
        "6 judged successes: 2 exported; left out: 1 (an adjudicator decided Not success), 2 (reviewers labelled "
        "it Not success), 1 (the verifier failed it).")


@pytest.mark.django_db
def test_asking_in_so_many_words_includes_them_but_never_an_adjudicated_refusal(judged_run):
    config = JudgeConfig.objects.get()
    rejected = export_select(run=judged_run, judge_config=config, budget=1000, include_reviewer_rejected=True)
    assert picked(rejected) == ["tg-alpha-1", "tg-alpha-3", "tg-beta-1", "tg-beta-2"]
    assert rejected.left_out == {"adjudicated": 1, "verifier": 1}
    both = export_select(run=judged_run, judge_config=config, budget=1000, include_reviewer_rejected=True,
                         include_verifier_failed=True)
    assert picked(both) == ["tg-alpha-1", "tg-alpha-2", "tg-alpha-3", "tg-beta-1", "tg-beta-2"]
    assert both.params()["include_reviewer_rejected"] and both.params()["include_verifier_failed"]


@pytest.mark.django_db
def test_a_failed_verifier_keeps_a_human_success_out_too(judged_run):
    beta4 = judged_run.episodes.get(task__task_id="tg-beta-4")
    assert picked(export_select(run=judged_run, source="human", budget=1000)) == ["tg-beta-4"]
    VerifierResult.objects.create(episode=beta4, ok=False, source="sandbox")
    selection = export_select(run=judged_run, source="human", budget=1000)
    assert picked(selection) == [] and selection.left_out == {"verifier": 1}
    assert picked(export_select(run=judged_run, source="human", budget=1000, include_verifier_failed=True)) == [
        "tg-beta-4"]


@pytest.mark.django_db
def test_human_over_judge_counts_the_judged_successes_the_labels_overrule(judged_run):
    selection = export_select(run=judged_run, source="human-over-judge", judge_config=JudgeConfig.objects.get(),
                              budget=1000)
    assert picked(selection) == ["tg-alpha-3", "tg-beta-1", "tg-beta-4"]
    assert selection.left_out == {"adjudicated": 1, "reviewers": 2, "verifier": 1}
    with pytest.raises(ExportError, match="judge source only"):
        export_select(run=judged_run, source="human-over-judge", judge_config=JudgeConfig.objects.get(),
                      include_reviewer_rejected=True)


@pytest.mark.django_db
def test_the_budget_and_empty_episodes_are_reasons_too(settings, db):
    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "cut", [
        HandTask("alpha", 1, rows=3), HandTask("alpha", 2, rows=0), HandTask("alpha", 3, rows=None),
        HandTask("alpha", 4, rows=2)])
    run = load_run_dir(run_dir, tasks_file)
    selection = export_select(run=run, judge_config=JudgeConfig.objects.get(), budget=2)
    assert picked(selection) == ["tg-alpha-1"]
    assert selection.left_out == {"no_rows": 1, "empty": 1, "budget": 1}
    assert selection.candidates == 3  # the reference's figure: the empty and the over-budget ones count


@pytest.mark.django_db
def test_the_rows_command_says_what_it_leaves_out_before_writing_and_writes_without_them(judged_run, settings,
                                                                                         capsys, monkeypatch):
    monkeypatch.chdir(settings.DATA_ROOT)
    call_command("taskgen", "rows", judged_run.name, "--out", "out", "--budget", "1000")
    err = capsys.readouterr().err
    said = err.index("6 judged successes: 2 exported; left out:")
    assert "2 (reviewers labelled it Not success)" in err and "1 (the verifier failed it)" in err
    assert said < err.index("rows: ") + len("rows: ") + 1  # the first thing it says, before any progress
    out = Path(settings.DATA_ROOT) / "out"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["tg-alpha-3", "tg-beta-1"]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["left_out"] == {"adjudicated": 1, "reviewers": 2, "verifier": 1}
    assert manifest["params"]["include_reviewer_rejected"] is False

    call_command("taskgen", "rows", judged_run.name, "--out", "all", "--budget", "1000",
                 "--include-reviewer-rejected", "--include-verifier-failed")
    assert "left out: 1 (an adjudicator decided Not success)." in capsys.readouterr().err
    assert len([p for p in (Path(settings.DATA_ROOT) / "all").iterdir() if p.is_dir()]) == 5


@pytest.mark.django_db
def test_the_rows_command_refuses_to_override_reviewers_for_a_human_source(judged_run, settings, capsys):
    with pytest.raises(SystemExit) as exit_info:
        call_command("taskgen", "rows", judged_run.name, "--out", str(Path(settings.DATA_ROOT) / "x"),
                     "--source", "human", "--include-reviewer-rejected")
    assert exit_info.value.code == 2 and "judge source only" in capsys.readouterr().err
    assert Export.objects.count() == 0


def _form(run, **extra) -> dict:
    return {"run": run.pk, "source": "judge", "judge_config": JudgeConfig.objects.get().pk, "budget": 1000,
            "out_dir": "", **extra}


@pytest.mark.django_db
def test_the_export_form_previews_what_it_leaves_out_and_writes_nothing(judged_run, admin_client_role):
    url = reverse("review:export_preview")
    page = admin_client_role.post(url, _form(judged_run), HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200 and "6 judged successes: 2 exported" in html
    config = JudgeConfig.objects.get().key  # the rows first, then the sentence (it ends in its own full stop)
    assert f"Before writing:</strong> 3 rows, approved by the verdicts of <code>{config}</code>. 6 judged" in html
    assert "reviewers labelled it Not success</td><td class=\"num\">2" in html
    assert Export.objects.count() == 0
    whole = admin_client_role.post(url, _form(judged_run, include_verifier_failed="on"))  # without JavaScript
    assert whole.status_code == 200 and "Pipeline runs" in whole.content.decode()
    assert "6 judged successes: 3 exported" in whole.content.decode()


@pytest.mark.django_db
def test_the_export_form_is_admins_only(judged_run, reviewer_client, client):
    url = reverse("review:export_preview")
    assert reviewer_client.post(url, _form(judged_run)).status_code == 403
    assert client.post(url, _form(judged_run)).status_code == 302


@pytest.mark.django_db
def test_a_download_export_from_the_form_leaves_them_out_and_says_so(judged_run, admin_client_role):
    start = reverse("review:pipeline_start", args=["export"])
    response = admin_client_role.post(start, _form(judged_run), follow=True)
    assert "left out: 1 (an adjudicator decided Not success), 2 (reviewers labelled" in response.content.decode()
    assert sorted(e["task_id"] for e in Export.objects.get().manifest["episodes"]) == ["tg-alpha-3", "tg-beta-1"]
    admin_client_role.post(start, _form(judged_run, include_reviewer_rejected="on", include_verifier_failed="on"))
    assert len(Export.objects.order_by("-pk")[0].manifest["episodes"]) == 5
    refused = admin_client_role.post(start, _form(judged_run, source="human", include_reviewer_rejected="on"))
    assert refused.status_code == 400 and "judge source only" in refused.content.decode()


def test_the_sentences_group_big_counts_by_thousands():
    """The export's sentences (the command's first line, the preview, the export page) read "27,644", as the
    pages' tables do."""
    words = left_out_words(source="judge", exported=12000, left_out={"no_rows": 1500, "budget": 3})
    assert words == ("13,503 judged successes: 12,000 exported; left out: 1,500 (it has no rows folder), 3 (the step "
                     "budget was reached before it).")
    assert ("Budget", "27,644 steps") in export_choices({"budget": 27644})
