"""The Tasks pages and the Pipeline page's propose and attempt-approved forms: roles (reviewers browse and flag,
admins edit, drop, restore, approve), history of every change, escaped text, and an attempt of exactly the approved
tasks."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from taskgen.engine.control import run_start
from taskgen.engine.worker import work
from taskgen.models import PipelineRun, Task, TaskEdit
from tests import propose_helpers

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = pytest.mark.django_db


def _work(pipeline_run: PipelineRun) -> PipelineRun:
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    pipeline_run.refresh_from_db()
    return pipeline_run


@pytest.fixture
def proposed(sandbox_sites) -> list[Task]:
    _work(run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop", "per_site": 6,
                                                              "batch": 6}))
    return list(Task.objects.filter(site__slug="shop").order_by("pk"))


def _page(slug: str = "shop") -> str:
    return reverse("review:site_tasks", args=[slug])


def test_reviewer_browses_a_site_with_proposer_batch_and_counts(reviewer_client, proposed):
    response = reviewer_client.get(_page())
    text = response.content.decode()
    assert response.status_code == 200 and proposed[0].task_id in text
    assert "6 tasks: 6 waiting" in text and "heuristic baseline (rules, not a model)" in text
    assert "duplicates dropped" in text and "batch 0" in text and "Approve selected" not in text
    assert reviewer_client.get(reverse("review:task_sites")).status_code == 200
    batch = reviewer_client.get(reverse("review:proposal_batch", args=[proposed[0].proposal_batch_id]))
    assert batch.status_code == 200 and "PAGES" in batch.content.decode()


def test_viewers_and_strangers_do_not_see_tasks(viewer_client, client, proposed):
    assert viewer_client.get(_page()).status_code == 403
    assert client.get(_page()).status_code == 302  # to the login page


def test_reviewer_cannot_edit_approve_or_drop(reviewer_client, proposed):
    task = proposed[0]
    assert reviewer_client.get(reverse("review:task_edit", args=[task.pk])).status_code == 403
    edit = {"instruction": "A new instruction long enough", "task_kind": "info"}
    assert reviewer_client.post(reverse("review:task_edit", args=[task.pk]), edit).status_code == 403
    bulk = reverse("review:tasks_bulk", args=["shop"])
    assert reviewer_client.post(bulk, {"action": "approve", "task": [task.pk]}).status_code == 403
    task.refresh_from_db()
    assert task.review_state == Task.ReviewState.PROPOSED and not TaskEdit.objects.exists()


def test_reviewer_flags_a_task_and_it_is_kept_in_the_history(reviewer_client, proposed):
    task = proposed[1]
    response = reviewer_client.post(reverse("review:task_flag", args=[task.pk]), {"note": "names no real item",
                                                                                  "next": _page() + "?show=all"})
    assert response.status_code == 302 and response["Location"] == _page() + "?show=all"
    task.refresh_from_db()
    assert task.review_flag == "names no real item"
    edit = TaskEdit.objects.get(task=task)
    assert (edit.action, edit.user, edit.before["review_flag"], edit.after["review_flag"]) == (
        "flag", reviewer_client.user, "", "names no real item")
    assert "flagged: names no real item" in reviewer_client.get(_page() + "?show=flagged").content.decode()


def test_admin_approves_drops_and_restores_in_bulk(admin_client_role, proposed):
    bulk = reverse("review:tasks_bulk", args=["shop"])
    ids = [t.pk for t in proposed]
    assert admin_client_role.post(bulk, {"action": "approve", "task": ids[:3]}).status_code == 302
    admin_client_role.post(bulk, {"action": "drop", "task": ids[3:5]})
    admin_client_role.post(bulk, {"action": "restore", "task": ids[4:5]})
    states = dict(Task.objects.values_list("pk", "review_state"))
    assert [states[pk] for pk in ids] == ["approved"] * 3 + ["dropped", "proposed", "proposed"]
    assert TaskEdit.objects.filter(user=admin_client_role.user).count() == 6
    restore = TaskEdit.objects.get(action="restore")
    assert (restore.before["review_state"], restore.after["review_state"]) == ("dropped", "proposed")
    text = admin_client_role.get(_page()).content.decode()
    assert "Approve selected" in text and "js/tasks.js" in text and 'data-edit="' in text


def test_admin_edits_a_task_keeping_its_id_and_history(admin_client_role, proposed):
    task = proposed[2]
    url = reverse("review:task_edit", args=[task.pk])
    short = admin_client_role.post(url, {"instruction": "too short", "task_kind": "info"})
    assert short.status_code == 400 and "at least 15" in short.content.decode()
    response = admin_client_role.post(url, {"instruction": "Report the price of “Décaf Colombia”", "task_kind": "info"})
    assert response.status_code == 302
    old_id = task.task_id
    task.refresh_from_db()
    assert (task.task_id, task.instruction, task.task_kind) == (old_id, "Report the price of “Décaf Colombia”", "info")
    page = admin_client_role.get(url).content.decode()
    assert "Report the price of “Décaf Colombia”" in page and "instruction" in page and "edit" in page


def test_proposed_text_is_escaped_everywhere(admin_client_role, proposed):
    task = proposed[0]
    Task.objects.filter(pk=task.pk).update(instruction='<script>alert("x")</script> and <b>bold</b> goal',
                                           grounding_note="names something not on the site: “<img src=x>”")
    for url in (_page(), reverse("review:task_edit", args=[task.pk]),
                reverse("review:proposal_batch", args=[task.proposal_batch_id])):
        text = admin_client_role.get(url).content.decode()
        assert "<script>alert" not in text and "<img src=x>" not in text
    assert "&lt;script&gt;alert" in admin_client_role.get(_page()).content.decode()


def test_pipeline_page_starts_a_propose_run(admin_client_role, sandbox_sites):
    response = admin_client_role.post(reverse("review:pipeline_start", args=["propose"]), {
        "sites": ["mail", "booking"], "per_site": 4, "batch": 4, "provider": "rules", "seed": 0})
    assert response.status_code == 302
    pipeline_run = _work(PipelineRun.objects.get(stage="propose"))
    assert pipeline_run.status == "done" and sorted(pipeline_run.params["sites"]) == ["booking", "mail"]
    assert Task.objects.filter(site__slug__in=["mail", "booking"]).count() == 8
    assert "Propose tasks for sites" in admin_client_role.get(reverse("review:pipeline_list")).content.decode()


def test_reviewer_cannot_start_a_propose_run(reviewer_client, sandbox_sites):
    response = reviewer_client.post(reverse("review:pipeline_start", args=["propose"]), {"provider": "rules"})
    assert response.status_code == 403 and not PipelineRun.objects.exists()


def test_an_attempt_run_takes_exactly_the_approved_tasks(admin_client_role, proposed, settings):
    approved = proposed[1:4]
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]),
                           {"action": "approve", "task": [t.pk for t in approved]})
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]), {"action": "drop", "task": [proposed[0].pk]})
    response = admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), {
        "sites": ["shop"], "agent": "rules", "name": "approved-shop", "mistakes": 0, "seed": 0})
    assert response.status_code == 302, response.content.decode()[-2000:]
    attempt = PipelineRun.objects.get(stage="attempt")
    tasks_file = Path(attempt.params["tasks_file"])
    assert tasks_file.is_relative_to(settings.DATA_ROOT.resolve())
    lines = tasks_file.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == [t.task_id for t in approved]
    assert attempt.total == 3 and set(attempt.units.values_list("key", flat=True)) == {t.task_id for t in approved}


def test_attempt_approved_with_all_takes_every_task_not_dropped(admin_client_role, proposed):
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]), {"action": "drop", "task": [proposed[0].pk]})
    admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), {
        "sites": ["shop"], "include_all": "on", "agent": "rules", "name": "all-shop", "mistakes": 0, "seed": 0})
    assert PipelineRun.objects.get(stage="attempt").total == 5


def test_attempt_approved_with_nothing_approved_says_so(admin_client_role, proposed):
    response = admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), {
        "sites": ["shop"], "agent": "scripted", "name": "none-shop", "mistakes": 0, "seed": 0})
    assert response.status_code == 400 and "no approved tasks for shop" in response.content.decode()
    assert not PipelineRun.objects.filter(stage="attempt").exists()


def test_approved_proposed_tasks_are_refused_to_the_scripted_agent_with_the_agents_that_can(admin_client_role,
                                                                                             proposed, settings):
    """The scripted agent replays known solutions, which proposed tasks do not have: each of its episodes failed
    with "has no known solution", tried three times; now the start is refused, naming the agents that can."""
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]),
                           {"action": "approve", "task": [t.pk for t in proposed[:2]]})
    response = admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), {
        "sites": ["shop"], "agent": "scripted", "name": "scripted-shop", "mistakes": 0, "seed": 0})
    page = response.content.decode()
    assert response.status_code == 400 and not PipelineRun.objects.filter(stage="attempt").exists()
    assert "the scripted agent can attempt none of these 2 task(s)" in page and "has no known solution" in page
    assert "Agents that can attempt them all: rules" in page
    assert not list((Path(settings.DATA_ROOT) / "approved").glob("*"))  # its tasks file is gone too


def test_the_attempt_forms_say_which_agents_can_attempt_which_tasks(admin_client_role, proposed):
    tasks_page = admin_client_role.get(reverse("review:task_sites")).content.decode()
    assert '<option value="rules" selected>' in tasks_page  # approved tasks: the agent that can do them
    assert "scripted: only tasks with a known solution" in tasks_page and "never proposed ones" in tasks_page
    assert "rules: any task on the sandbox sites" in tasks_page and "not a model: it may fail" in tasks_page
    pipeline = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert pipeline.count("scripted: only tasks with a known solution") == 2  # both attempt forms
    assert '<option value="scripted" selected>' in pipeline


def test_a_refused_attempt_of_approved_tasks_leaves_no_tasks_file_behind(admin_client_role, proposed, settings):
    admin_client_role.post(reverse("review:tasks_bulk", args=["shop"]), {"action": "approve", "task": [proposed[1].pk]})
    form = {"sites": ["shop"], "agent": "rules", "name": "twice-shop", "mistakes": 0, "seed": 0}
    assert admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), form).status_code == 302
    again = admin_client_role.post(reverse("review:pipeline_start", args=["attempt-approved"]), form)
    assert again.status_code == 400  # the run name is taken
    kept = PipelineRun.objects.get(stage="attempt").params["tasks_file"]
    assert [str(p) for p in (Path(settings.DATA_ROOT) / "approved").iterdir()] == [kept]


def test_the_tasks_page_makes_the_same_queries_for_few_and_many_tasks(admin_client_role, sandbox_sites):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count(per_site: int) -> int:
        Task.objects.all().delete()
        _work(run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "mail",
                                                                  "per_site": per_site, "batch": per_site}))
        with CaptureQueriesContext(connection) as queries:
            assert admin_client_role.get(_page("mail")).status_code == 200
        return len(queries)

    assert count(2) == count(12)


def test_a_cancelled_propose_run_resumes_without_asking_again_what_is_done(sandbox_sites):
    from taskgen.engine.control import run_cancel, run_resume

    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "booking",
                                                                      "per_site": 9, "batch": 3})
    work(pipeline_run_id=pipeline_run.pk, owner="test", slice_seconds=0)  # a first batch, then stop
    done_before = set(Task.objects.values_list("task_id", flat=True))
    assert 0 < len(done_before) < 9
    assert run_cancel(pipeline_run=pipeline_run)
    _work(run_resume(pipeline_run=pipeline_run))
    assert pipeline_run.status == "done" and Task.objects.filter(site__slug="booking").count() == 9
    assert done_before <= set(Task.objects.values_list("task_id", flat=True))
    assert sorted(pipeline_run.proposal_batches.values_list("index", flat=True)) == [0, 1, 2]


def test_the_gemini_proposer_from_the_pipeline_page(admin_client_role, sandbox_sites, settings):
    from tests.fakes.gemini_server import FakeGemini

    fake = FakeGemini().start()
    settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL = "test-key-not-real", fake.base_url
    try:
        response = admin_client_role.post(reverse("review:pipeline_start", args=["propose"]), {
            "sites": ["shop"], "per_site": 5, "batch": 5, "provider": "gemini", "model": "gemini-page", "seed": 1})
        assert response.status_code == 302
        pipeline_run = _work(PipelineRun.objects.get(stage="propose"))
    finally:
        fake.stop()
    assert pipeline_run.status == "done" and fake.requests[0]["model"] == "gemini-page"
    text = admin_client_role.get(_page()).content.decode()
    assert "gemini (gemini-page): 5 kept in 1 batches" in text


def test_the_tasks_page_shows_progress_per_site_of_a_running_run(reviewer_client, sandbox_sites):
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop,mail",
                                                                      "per_site": 6, "batch": 3})
    work(pipeline_run_id=pipeline_run.pk, owner="test", slice_seconds=0)  # the first batch only
    text = reviewer_client.get(reverse("review:task_sites")).content.decode()
    assert "Proposing now" in text
    assert "<td>shop</td>\n      <td>1 of 4</td><td>3</td>" in text and "<td>mail</td>\n      <td>0 of 4</td>" in text


def test_the_tasks_page_names_each_site_once(reviewer_client):
    """An imported site's name is its slug: the page said "amazon-com amazon-com"."""
    import re

    from tests.factories import SiteFactory, TaskFactory

    TaskFactory(site=SiteFactory(slug="amazon-com", name="amazon-com"))
    TaskFactory(site=SiteFactory(slug="shop", name="Shop"))
    html = reviewer_client.get(reverse("review:task_sites")).content.decode()
    cells = [re.sub(r"<[^>]+>", "", cell).split() for cell in re.findall(r'<tr><td>(<a href="/tasks/.*?)</td>', html)]
    assert cells == [["amazon-com"], ["Shop", "shop"]]
