"""Labels are sacred: a restore on the engine racing reviewers' live label posts loses nothing (PostgreSQL; the
restore's workers and the posts are released together by a barrier). Every post is stored with its history; every
line of the backup is written, already there, or refused as a conflict with what a reviewer wrote (never
overwritten); every final label is the rule applied to the episode's labels."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from review.services import label_set
from taskgen.engine.worker import work
from taskgen.labels.backup import labels_export_lines
from taskgen.labels.rule import final_verdict_of_labels
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
from tests.factories import EpisodeFactory, RunFactory, UserFactory
from tests.labels_restore import backup_bytes

pytestmark = pytest.mark.django_db(transaction=True)
EPISODES, CONTESTED = 24, 8  # ann's live posts contest the restore's own labels on the first CONTESTED episodes


def _backup(ann) -> list[str]:
    run = RunFactory(name="race-run")
    episodes = [EpisodeFactory(run=run, task__task_id=f"race-{n:02d}") for n in range(EPISODES)]
    for episode in episodes:
        label_set(episode=episode, reviewer=ann, verdict="SUCCESS", note="from the backup")
    lines = list(labels_export_lines())
    for model in (LabelChange, Label, FinalLabelChange, FinalLabel):
        model.objects.all().delete()
    return lines


def _checked_restore(lines: list[str]) -> PipelineRun:
    """A restore whose every line is checked and whose writes are due now (so they race the posts)."""
    import io

    from taskgen.stages.begin import labels_restore_begin

    pipeline_run = labels_restore_begin(source=io.BytesIO(backup_bytes(lines)), name="race.jsonl",
                                        all_or_nothing=False, user=None)
    writes = WorkUnit.objects.filter(pipeline_run=pipeline_run, key__startswith="write-")
    writes.update(not_before="2100-01-01T00:00:00Z")
    while WorkUnit.objects.filter(pipeline_run=pipeline_run, key__in=["verify"]).exclude(status="done").exists():
        work(pipeline_run_id=pipeline_run.pk, owner="checker", slice_seconds=1)
    writes.update(not_before=None)
    return pipeline_run


def _race(pipeline_run: PipelineRun, posts: list[tuple]) -> list[str]:
    """Two restore workers and every post start at one barrier; what went wrong in any thread."""
    barrier, errors = threading.Barrier(2 + len(posts)), []

    def restorer(name: str) -> None:
        try:
            barrier.wait(timeout=60)
            while work(pipeline_run_id=pipeline_run.pk, owner=name, slice_seconds=5) is not None:
                pass
        except Exception as exc:  # noqa: BLE001  (reported by the test)
            errors.append(f"{name}: {exc!r}")
        finally:
            connection.close()

    def poster(episode, reviewer, verdict) -> None:
        try:
            barrier.wait(timeout=60)
            label_set(episode=episode, reviewer=reviewer, verdict=verdict, note="posted live")
        except Exception as exc:  # noqa: BLE001
            errors.append(f"post by {reviewer}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=restorer, args=(f"worker-{n}",)) for n in range(2)]
    threads += [threading.Thread(target=poster, args=post) for post in posts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


@pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need PostgreSQL")
def test_a_restore_racing_live_label_posts_loses_nothing():
    ann = UserFactory(username="ann", role="reviewer")
    lines = _backup(ann)
    reviewers = [UserFactory(username=f"live-{n:02d}", role="reviewer") for n in range(EPISODES)]
    pipeline_run = _checked_restore(lines)
    episodes = list(Episode.objects.order_by("task__task_id"))
    posts = [(episode, reviewer, "NOT SUCCESS" if n % 2 else "SUCCESS")
             for n, (episode, reviewer) in enumerate(zip(episodes, reviewers, strict=True))]
    posts += [(episode, ann, "NOT SUCCESS") for episode in episodes[:CONTESTED]]

    assert _race(pipeline_run, posts) == []

    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done", pipeline_run.errors
    for episode, reviewer, verdict in posts:  # every post is stored, with its own history entry
        label = Label.objects.get(episode=episode, reviewer=reviewer)
        assert label.verdict == verdict and label.note == "posted live"
        assert LabelChange.objects.filter(label=label, changed_by=reviewer, after__verdict=verdict,
                                          after__note="posted live").count() == 1
    for episode in episodes[CONTESTED:]:  # ann's restored labels, where nobody contested them
        assert Label.objects.get(episode=episode, reviewer=ann).note == "from the backup"
    result = pipeline_run.result
    accounted = sum(result["added"].values()) + sum(result["already_there"].values()) + result["refused"]
    assert accounted == len(lines) - 1  # every line but the header: written, already there, or refused
    refusals = LabelRestoreLine.objects.filter(pipeline_run=pipeline_run, outcome="refused").values_list(
        "refusal", flat=True)
    assert all("kept, not overwritten" in why for why in refusals), list(refusals)  # conflicts only
    for episode in episodes:  # the final label is the rule applied to the labels as they ended
        verdicts = list(Label.objects.filter(episode=episode).values_list("verdict", flat=True))
        final = FinalLabel.objects.filter(episode=episode).first()
        assert (final.verdict if final else None) == final_verdict_of_labels(verdicts), episode.task.task_id
