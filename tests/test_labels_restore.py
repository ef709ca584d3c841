"""A labels restore meets bad lines (issue 24). Seen: a note with a NUL, a verdict longer than its column, a bad
timestamp or a list where a run name belongs crashed the restore part way, leaving earlier rows written and never
printing the refusals it had collected (truncated, unknown-episode and unknown-user lines among them); through
Exports -> Restore labels the same files gave HTTP 500; a verdict `PWNED` was stored and shown. Now every line is
checked first (through the same check as a reviewer's label), every good line is written and each refused line is
listed by its number; with all-or-nothing, nothing is written."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from review.services import label_set
from taskgen.engine.control import run_cancel, run_resume
from taskgen.engine.worker import work
from taskgen.labels.backup import labels_export_lines
from taskgen.labels.fields import ReviewError
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import (
    Episode,
    FinalLabel,
    FinalLabelChange,
    Label,
    LabelChange,
    LabelRestoreLine,
    PipelineRun,
    WorkUnit,
)
from taskgen.stages.begin import labels_restore_begin
from taskgen.stages.labels.write import bucket_write
from tests.factories import EpisodeFactory, RunFactory, UserFactory
from tests.labels_restore import backup_bytes, restore, work_here

pytestmark = pytest.mark.django_db


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Label, LabelChange, FinalLabel, FinalLabelChange))


def _wipe() -> None:
    for model in (LabelChange, Label, FinalLabelChange, FinalLabel):
        model.objects.all().delete()


@pytest.fixture
def backup() -> list[str]:
    """A backup of labels on three episodes (by ann and bob, one adjudicated), taken, then the labels wiped."""
    ann, bob = UserFactory(username="ann", role="reviewer"), UserFactory(username="bob", role="reviewer")
    run = RunFactory(name="lab-run")
    episodes = [EpisodeFactory(run=run, task__task_id=f"shop-{n}") for n in range(3)]
    label_set(episode=episodes[0], reviewer=ann, verdict="SUCCESS", note="right mug", tags=["price"])
    label_set(episode=episodes[0], reviewer=bob, verdict="NOT SUCCESS")
    final_label_adjudicate(episode=episodes[0], adjudicator=UserFactory(username="ada", role="adjudicator"),
                           verdict="SUCCESS", reason="the mug is right")
    label_set(episode=episodes[1], reviewer=ann, verdict="UNSURE")
    label_set(episode=episodes[2], reviewer=bob, verdict="SUCCESS")
    lines = list(labels_export_lines())
    _wipe()
    return lines


def _label_line(**changes) -> str:
    row = {"kind": "label", "run": "lab-run", "task_id": "shop-2", "reviewer": "ann", "verdict": "SUCCESS",
           "part_overrides": [], "note": "", "tags": [], "created_at": "2026-01-02T03:04:05+00:00",
           "updated_at": "2026-01-02T03:04:05+00:00"}
    return json.dumps({**row, **changes})


BAD_LINES = {  # what each bad line is, and the words its refusal must say
    "a note with a NUL": (_label_line(note="bad\x00note"), "note contains a NUL character"),
    "a verdict longer than its column": (_label_line(verdict="SUCCESS-AND-MORE-THAN-TWELVE"), "unknown verdict"),
    "a bad timestamp": (_label_line(created_at="yesterday"), "created_at 'yesterday' is not a time"),
    "a list where a run name belongs": (_label_line(run=["lab-run"]), "run must be text, not list"),
    "a truncated line": (_label_line()[:70], "not JSON (Unterminated string"),
    "an unknown episode": (_label_line(task_id="shop-404"), "no episode 'shop-404' of run 'lab-run'"),
    "an unknown user": (_label_line(reviewer="mallory"), "no user 'mallory' in this database"),
    "verdict PWNED": (_label_line(verdict="PWNED"), "unknown verdict 'PWNED'"),
    "a history entry saying PWNED": (json.dumps({"kind": "label_change", "run": "lab-run", "task_id": "shop-1",
                                                 "reviewer": "ann", "changed_by": "ann", "before": None,
                                                 "after": {"verdict": "PWNED"},
                                                 "changed_at": "2026-01-02T03:04:05+00:00"}), "unknown verdict"),
    "a final label saying PWNED": (json.dumps({"kind": "final_label", "run": "lab-run", "task_id": "shop-2",
                                               "verdict": "PWNED", "decided_at": "2026-01-02T03:04:05+00:00"}),
                                   "unknown verdict 'PWNED'"),
}


def _with_bad_lines(backup: list[str]) -> tuple[list[str], dict[str, int]]:
    """The backup with every bad line put in after its first good row (so good rows come before and after them)."""
    bad = [line for line, _ in BAD_LINES.values()]
    lines = [*backup[:2], *bad, *backup[2:]]
    return lines, {what: 3 + n for n, what in enumerate(BAD_LINES)}


def test_every_bad_line_is_refused_by_its_number_and_every_good_line_written(backup):
    lines, numbers = _with_bad_lines(backup)
    report = restore(lines)
    assert report.pipeline_run.status == "done"
    for what, (_, words) in BAD_LINES.items():
        said = [r for r in report.refused if r.startswith((f"line {numbers[what]} ", f"line {numbers[what]}:"))]
        assert said and words in said[0], f"{what}: {report.refused}"
    assert len(report.refused) == len(BAD_LINES)
    assert report.added == {"label": 4, "label_change": 4, "final_label": 3, "final_label_change": 5}
    assert not Label.objects.filter(verdict="PWNED").exists() and not FinalLabel.objects.filter(verdict="PWNED")
    assert sorted(labels_export_lines()) == sorted(backup)  # exactly the backup's rows, nothing of the bad lines


def test_all_or_nothing_writes_nothing_when_a_line_is_refused(backup):
    lines, _ = _with_bad_lines(backup)
    report = restore(lines, all_or_nothing=True)
    assert len(report.refused) == len(BAD_LINES) and _counts() == (0, 0, 0, 0)
    assert report.pipeline_run.result["written"] == "nothing" and set(report.added.values()) == {0}
    clean = restore(backup, all_or_nothing=True)
    assert clean.ok and _counts() == (4, 4, 3, 5)


def test_a_restore_and_a_reviewer_refuse_pwned_with_the_same_words(backup):
    report = restore([_label_line(verdict="PWNED")])
    episode = Episode.objects.get(task__task_id="shop-2")
    with pytest.raises(ReviewError) as refused:
        label_set(episode=episode, reviewer=UserFactory(), verdict="PWNED")
    assert report.refused == [f"line 1 (label): {refused.value}"]


def test_history_without_its_label_and_two_different_copies_of_a_label_are_refused(backup):
    orphan = json.dumps({"kind": "label_change", "run": "lab-run", "task_id": "shop-2", "reviewer": "ann",
                         "changed_by": "ann", "before": None, "after": {"verdict": "SUCCESS"},
                         "changed_at": "2026-01-02T03:04:05+00:00"})
    first, second = _label_line(task_id="shop-1", reviewer="bob"), _label_line(task_id="shop-1", reviewer="bob",
                                                                               verdict="UNSURE")
    report = restore([orphan, first, second], all_or_nothing=True)
    assert report.refused == ["line 1 (label_change): no label of this episode by 'ann' in this file or this "
                              "database", "line 3 (label): line 2 of this file gives this label differently"]
    assert _counts() == (0, 0, 0, 0)


def test_the_command_prints_every_refusal_with_its_line_and_exits_1(backup, tmp_path):
    lines, numbers = _with_bad_lines(backup)
    path = tmp_path / "labels.jsonl"
    path.write_bytes(backup_bytes(lines))
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as ended:
        call_command("taskgen", "labels", "import", str(path), "--all-or-nothing", stdout=stdout, stderr=stderr)
    assert ended.value.code == 1 and _counts() == (0, 0, 0, 0) and "written: nothing" in stdout.getvalue()
    for what, number in numbers.items():
        assert f"refused: line {number} " in stderr.getvalue() or f"refused: line {number}:" in stderr.getvalue(), what
    with pytest.raises(SystemExit):
        call_command("taskgen", "labels", "import", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert _counts() == (4, 4, 3, 5)


def test_the_web_restore_only_stores_the_file_and_the_run_lists_the_refusals(backup, admin_client_role):
    lines, numbers = _with_bad_lines(backup)
    upload = io.BytesIO(backup_bytes(lines))
    upload.name = "bad.jsonl"
    response = admin_client_role.post(reverse("review:labels_upload"), {"file": upload, "all_or_nothing": "on"})
    pipeline_run = PipelineRun.objects.get(stage="labels")
    assert response.status_code == 302 and pipeline_run.status == "running" and _counts() == (0, 0, 0, 0)
    assert pipeline_run.params["all_or_nothing"] is True and pipeline_run.params["lines"] == len(lines)
    work_here(pipeline_run)
    page = admin_client_role.get(pipeline_run.get_absolute_url()).content.decode()
    assert f"line {numbers['verdict PWNED']} (label): unknown verdict" in page and _counts() == (0, 0, 0, 0)
    listed = admin_client_role.get(reverse("review:labels_restore_refused", args=[pipeline_run.pk]))
    assert listed["Content-Type"].startswith("text/plain") and len(listed.content.decode().splitlines()) == 10
    page = admin_client_role.get(reverse("review:export_list")).content.decode()
    assert 'name="all_or_nothing"' in page


def test_a_write_unit_done_twice_or_resumed_writes_each_line_once(backup):
    pipeline_run = labels_restore_begin(source=io.BytesIO(backup_bytes(backup)), name="b.jsonl", all_or_nothing=False,
                                        user=None)
    writes = WorkUnit.objects.filter(pipeline_run=pipeline_run, key__startswith="write-")
    writes.update(not_before="2100-01-01T00:00:00Z")  # every line checked, nothing written yet
    while WorkUnit.objects.filter(pipeline_run=pipeline_run, key="verify").exclude(status="done").exists():
        work(pipeline_run_id=pipeline_run.pk, owner="test", slice_seconds=1)
    buckets = sorted(int(key.split("-")[1]) for key in writes.values_list("key", flat=True))
    written = sum(bucket_write(pipeline_run_id=pipeline_run.pk, bucket=b)["lines"] for b in buckets)
    assert written == len(backup) - 1 and _counts() == (4, 4, 3, 5)
    # a unit whose lease ran out under a live worker is done again: its lines' outcomes were kept with the writes
    assert [bucket_write(pipeline_run_id=pipeline_run.pk, bucket=b) for b in buckets] == [{"lines": 0}] * len(buckets)
    assert _counts() == (4, 4, 3, 5)
    run_cancel(pipeline_run=pipeline_run)  # cancelled with its write units queued, then resumed
    writes.update(not_before=None)
    finished = work_here(run_resume(pipeline_run=pipeline_run))
    assert finished.status == "done" and _counts() == (4, 4, 3, 5)
    assert finished.result["added"] == {"label": 4, "label_change": 4, "final_label": 3, "final_label_change": 5}
    assert not LabelRestoreLine.objects.filter(pipeline_run=pipeline_run).exists()  # written lines are dropped
    assert restore(backup).unchanged == {"label": 4, "label_change": 4, "final_label": 3, "final_label_change": 5}
