"""Certify on the web: the Certify queue in the keyboard workbench serves the design's next episodes and its page
shows the certificate; Validate and Exports show the panel; the export form's "certified at least" refuses to write
below the target. Every page needs a login and its role; every POST its CSRF token."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from review.models import Queue
from taskgen.models import Episode, Export, Label, PipelineRun
from tests.certify_helpers import judged_run, label_as_truth
from tests.factories import UserFactory
from tests.runfiles import HandTask, load_run_dir, write_run_dir

pytestmark = pytest.mark.django_db


def _open(client, run, config, follow: bool = False, **extra):
    return client.post(reverse("review:certify_open"), {"run": run.name, "judge_config": config.key, **extra},
                       follow=follow)


def test_a_reviewer_opens_the_certify_queue_and_is_served_the_designs_next_episode(reviewer_client):
    run, config, truth = judged_run(episodes=20, risky=4)
    response = _open(reviewer_client, run, config, target="0.8")
    queue = Queue.objects.get(kind=Queue.Kind.CERTIFY, run=run, judge_config=config)
    assert response.status_code == 302 and response["Location"] == queue.get_absolute_url()
    assert queue.blind and queue.certify["target"] == 0.8
    page = reviewer_client.get(queue.get_absolute_url())
    body = page.content.decode()
    assert page.status_code == 200 and "Not certified yet" in body and "in the design's order" in body
    first_up = page.context["cert"]["next"][0]
    taken = reviewer_client.post(reverse("review:queue_next", args=[queue.pk]))
    episode = Episode.objects.get(pk=int(taken["Location"].split("/episodes/")[1].split("/")[0]))
    assert episode.task.task_id == first_up
    reviewer_client.post(reverse("review:label_post", args=[episode.pk]),
                         {"verdict": "SUCCESS" if truth[episode.pk] else "NOT SUCCESS", "queue": queue.pk})
    assert Label.objects.filter(episode=episode).exists()
    again = reviewer_client.get(queue.get_absolute_url()).context["cert"]
    assert again["labels"] == 1 and first_up not in again["next"]
    assert _open(reviewer_client, run, config).status_code == 302  # the same queue again, not a second one
    assert Queue.objects.filter(kind=Queue.Kind.CERTIFY).count() == 1


def test_bad_choices_go_back_with_the_reason(reviewer_client):
    run, config, _ = judged_run(episodes=4, risky=0)
    response = _open(reviewer_client, run, config, target="2", follow=True)
    assert "between 0 and 1" in response.content.decode() and not Queue.objects.filter(kind="certify").exists()
    response = reviewer_client.post(reverse("review:certify_open"), {"run": run.name, "judge_config": config.key,
                                                                     "exclude_risk": "nonsense"}, follow=True)
    assert "unknown risk" in response.content.decode()


def test_logins_roles_and_csrf(client, viewer_client):
    run, config, _ = judged_run(episodes=4, risky=0)
    assert _open(client, run, config).status_code == 302 and "login" in _open(client, run, config)["Location"]
    assert _open(viewer_client, run, config).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(UserFactory(username="csrf-reviewer", role="reviewer"))
    assert _open(strict, run, config).status_code == 403
    assert not Queue.objects.filter(kind=Queue.Kind.CERTIFY).exists()
    assert client.get(reverse("review:export_list") + f"?run={run.name}").status_code == 302
    assert client.get(reverse("review:certificate_panel") + f"?run={run.name}").status_code == 302


def test_validate_and_exports_show_the_certificate_panel_with_its_cuts(viewer_client):
    run, config, _ = judged_run(episodes=12, risky=3)
    page = viewer_client.get(reverse("review:validate") + f"?runs={run.pk}&against=verifier")
    assert page.status_code == 200 and reverse("review:certificate_panel") in page.content.decode()
    panel = viewer_client.get(reverse("review:certificate_panel") + f"?run={run.name}", HTTP_HX_REQUEST="true")
    assert panel.context["cert"]["population"] == 12 and "Leaving the riskiest strata out" in panel.content.decode()
    assert "<html" not in panel.content.decode()
    alone = viewer_client.get(reverse("review:certificate_panel") + "?run=nope")
    assert alone.status_code == 400 and "choose a run" in alone.content.decode()
    exports = viewer_client.get(reverse("review:export_list") + f"?run={run.name}&judge_config={config.key}")
    body = exports.content.decode()
    assert exports.context["cert"]["population"] == 12 and "Certificate: " in body
    assert [row["exclude_risk"] for row in exports.context["cert"]["cuts"]] == [[], ["inconsistent"]]


def test_the_export_forms_certified_at_least_refuses_to_write_below_the_target(admin_client_role):
    run, config, _ = judged_run(episodes=12, risky=3)
    form = {"run": run.pk, "source": "judge", "judge_config": config.pk, "budget": 1000, "certify": "0.9"}
    preview = admin_client_role.post(reverse("review:export_preview"), form, HTTP_HX_REQUEST="true")
    assert "not certified" in preview.content.decode()
    response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]), form)
    assert response.status_code == 400 and "not certified" in response.content.decode()
    assert "more label" in response.content.decode() and not Export.objects.exists()


def _strata_cells(client, run) -> list[list[str]]:
    """The certificate panel's strata table, a list of cells (after the stratum's name) a row."""
    body = client.get(reverse("review:certificate_panel") + f"?run={run.name}").content.decode()
    rows = re.findall(r'<tr><td>[^<]*</td>(?:<td class="num">.*?</td>){5}</tr>', body)
    return [re.findall(r'<td class="num">(.*?)</td>', row) for row in rows]


def test_a_stratum_with_no_label_yet_shows_no_probability_of_a_label(viewer_client):
    """n_h / N_h is 0 in a stratum nobody has labelled yet: the table says "—" there, not "0.0" (which read as a
    design that would never label it); once labelled, a stratum shows its probability."""
    run, config, truth = judged_run(episodes=12, risky=3)
    cells = _strata_cells(viewer_client, run)
    assert cells and all(row[1] == "0" for row in cells)  # nothing labelled yet
    assert [row[3] for row in cells] == ["—"] * len(cells)
    label_as_truth(truth, truth)  # every episode: each stratum a census
    assert [row[3] for row in _strata_cells(viewer_client, run)] == ["1.0"] * len(cells)


def test_big_counts_read_with_thousands_separators(viewer_client, admin_client_role):
    """A researcher reads "27,644", not "27644": the certificate's budget and a pipeline run's progress counts are
    grouped by thousands (the attributes a script or a link reads keep the bare number)."""
    run, _config, _ = judged_run(episodes=12, risky=3)
    panel = viewer_client.get(reverse("review:certificate_panel") + f"?run={run.name}")  # the default budget
    body = panel.content.decode()
    assert panel.context["cert"]["budget"] == 27644
    assert "of the 27,644 budget" in body and "27644 budget" not in body
    pr = PipelineRun.objects.create(stage="judge", status="running", total=12500, done=1200, failed=3)
    progress = admin_client_role.get(reverse("review:pipeline_progress", args=[pr.pk]), HTTP_HX_REQUEST="true")
    text = progress.content.decode()
    assert "1,200 done" in text and "3 failed" in text and "of 12,500" in text
    assert 'max="12500"' in text and 'value="1203"' in text


def test_an_export_with_nothing_to_write_says_why_beside_its_empty_certificate(viewer_client, settings):
    """The demo's Online-Mind2Web run: 226 judged successes, none with a rows folder. The panel said only "nothing to
    certify"; it says what the export leaves out and why, as the export's own preview does."""
    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "bare", [
        HandTask("alpha", 1, rows=None), HandTask("beta", 1, rows=None), HandTask("beta", 2, rows=3, judged=False)])
    run = load_run_dir(run_dir, tasks_file)
    body = viewer_client.get(reverse("review:certificate_panel") + f"?run={run.name}").content.decode()
    assert "nothing to certify" in body
    assert "2 judged successes: 0 exported; left out: 2 (it has no rows folder)." in body
