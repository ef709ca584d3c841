"""Labels backed up and restored: export -> fresh database -> runs imported again -> import gives the same labels,
history and final labels; a second import changes nothing; missing episodes or reviewers are refused and listed."""
from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from review.services import label_set
from taskgen.labels.backup import labels_export_lines
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import Episode, FinalLabel, FinalLabelChange, Label, LabelChange, PipelineRun, Run, Task
from taskgen.stages.import_.service import import_run_dir
from tests.factories import UserFactory
from tests.labels_restore import RESTORED, restore, work_here
from tests.rundirs import build_run

pytestmark = pytest.mark.django_db


def _episode(task_id: str) -> Episode:
    return Episode.objects.get(task__task_id=task_id)


def _labelled_run(tmp_path) -> tuple:
    run_dir = build_run(tmp_path, ["shop-a", "shop-b", "shop-c"])
    import_run_dir(run_dir=run_dir, name="lab-run")
    ann, bob = UserFactory(username="ann", role="reviewer"), UserFactory(username="bob", role="reviewer")
    judge = UserFactory(username="ada", role="adjudicator")
    label_set(episode=_episode("shop-a"), reviewer=ann, verdict="SUCCESS", note="looks right", tags=["price"])
    label_set(episode=_episode("shop-a"), reviewer=ann, verdict="NOT SUCCESS", note="wrong mug", part_overrides=[1])
    label_set(episode=_episode("shop-a"), reviewer=bob, verdict="SUCCESS")
    final_label_adjudicate(episode=_episode("shop-a"), adjudicator=judge, verdict="NOT SUCCESS", reason="wrong mug")
    label_set(episode=_episode("shop-b"), reviewer=bob, verdict="UNSURE", note="ünïcode <b>kept</b>")
    label_set(episode=_episode("shop-c"), reviewer=ann, verdict="SUCCESS")
    return run_dir, (ann, bob, judge)


def _backup() -> list[str]:
    return list(labels_export_lines())


def _wipe_database() -> None:
    """What a fresh database has after the users are made again: no labels, no runs, no tasks."""
    for model in (LabelChange, Label, FinalLabelChange, FinalLabel):
        model.objects.all().delete()
    Run.objects.all().delete()
    Task.objects.all().delete()


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Label, LabelChange, FinalLabel, FinalLabelChange))


def test_export_then_fresh_database_then_import_gives_the_same_labels_and_history(tmp_path):
    run_dir, _users = _labelled_run(tmp_path)
    before = _backup()
    counts = _counts()
    assert counts == (4, 5, 3, 6)  # 5 label writes; a final label for a, b, c; a's changed 4 times
    rows = [json.loads(line) for line in before]
    assert rows[0]["format"] == "taskgen-labels"
    assert not any(k.endswith("_id") and k != "task_id" for row in rows for k in row)  # names, never database ids

    _wipe_database()
    import_run_dir(run_dir=run_dir, name="lab-run")
    report = restore(before)

    assert report.ok and report.added == {"label": 4, "label_change": 5, "final_label": 3, "final_label_change": 6}
    assert sorted(_backup()) == sorted(before)  # same labels, same history, same final labels, same times
    final = _episode("shop-a").final_label
    assert final.adjudicated and final.verdict == "NOT SUCCESS" and final.decided_by.username == "ada"


def test_a_second_import_changes_nothing(tmp_path):
    _labelled_run(tmp_path)
    backup = _backup()
    counts = _counts()
    report = restore(backup)
    assert report.ok and set(report.added.values()) == {0}
    assert report.unchanged == {"label": 4, "label_change": 5, "final_label": 3, "final_label_change": 6}
    assert _counts() == counts and sorted(_backup()) == sorted(backup)


def test_rows_whose_episode_or_reviewer_is_missing_are_refused_with_a_list(tmp_path):
    run_dir, _users = _labelled_run(tmp_path)
    backup = _backup()
    _wipe_database()
    import_run_dir(run_dir=run_dir, name="lab-run")
    Episode.objects.filter(task__task_id="shop-c").delete()
    get_user_model().objects.filter(username="bob").delete()
    report = restore([*backup, "not json\n"])
    assert not report.ok
    text = "\n".join(report.refused)
    assert "no episode 'shop-c' of run 'lab-run'" in text and "no user 'bob'" in text and "not JSON" in text
    assert Label.objects.filter(reviewer__username="ann").count() == 1  # ann's label of shop-a restored, not shop-c


def test_a_label_that_differs_is_never_overwritten(tmp_path):
    _labelled_run(tmp_path)
    backup = _backup()
    label = Label.objects.get(episode__task__task_id="shop-c")
    label_set(episode=label.episode, reviewer=label.reviewer, verdict="NOT SUCCESS")
    report = restore(backup)
    assert any("different label of this episode by this reviewer (kept, not overwritten)" in r
               for r in report.refused)
    assert Label.objects.get(pk=label.pk).verdict == "NOT SUCCESS"


def test_the_command_exports_and_imports(tmp_path):
    _labelled_run(tmp_path)
    out = tmp_path / "labels.jsonl"
    call_command("taskgen", "labels", "export", "--out", str(out), stdout=io.StringIO())
    assert len(out.read_text().splitlines()) == 1 + 4 + 5 + 3 + 6
    stdout = io.StringIO()
    call_command("taskgen", "labels", "import", str(out), stdout=stdout, stderr=io.StringIO())
    assert "label: 0 added, 4 already there" in stdout.getvalue() and "refused: 0" in stdout.getvalue()
    assert RESTORED in stdout.getvalue()


def test_admins_download_and_restore_labels_from_the_exports_page(tmp_path, admin_client_role):
    _labelled_run(tmp_path)
    page = admin_client_role.get(reverse("review:export_list")).content.decode()
    assert reverse("review:labels_download") in page and 'enctype="multipart/form-data"' in page
    response = admin_client_role.get(reverse("review:labels_download"))
    body = b"".join(response.streaming_content)
    assert response.status_code == 200 and response["Content-Disposition"].endswith('.jsonl"')
    upload = io.BytesIO(body)
    upload.name = "labels.jsonl"
    response = admin_client_role.post(reverse("review:labels_upload"), {"file": upload})
    pipeline_run = PipelineRun.objects.get(stage="labels")
    assert response.status_code == 302 and response["Location"] == pipeline_run.get_absolute_url()
    work_here(pipeline_run)
    text = admin_client_role.get(pipeline_run.get_absolute_url()).content.decode()
    assert "Restore labels" in text and "already there" in text and "No errors." in text


def test_only_admins_may_download_or_restore_labels(reviewer_client, client):
    download, upload = reverse("review:labels_download"), reverse("review:labels_upload")
    assert reviewer_client.get(download).status_code == 403 and reviewer_client.post(upload).status_code == 403
    assert client.get(download).status_code == 302 and client.post(upload).status_code == 302  # to the login page
    assert "Labels backup" not in reviewer_client.get(reverse("review:export_list")).content.decode()
    refused = reverse("review:labels_restore_refused", args=[1])
    assert reviewer_client.get(refused).status_code == 403 and client.get(refused).status_code == 302


def test_a_restore_needs_the_csrf_token(admin_client_role):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_client_role.user)
    assert strict.post(reverse("review:labels_upload"), {}).status_code == 403
