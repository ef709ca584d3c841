"""The reviewers' data moved from the review app to the data model (review 0011, taskgen 0020): only Django's picture
of it moved. Labels written before the move are there after it, with their history, and a known-truth check keeps
its queue's id; going back restores the old picture. Labels are what money cannot rebuild: this is tested on the
database CI runs, with rows made by the models as they were before the move."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("review", "0010_reviewer_checks"), ("taskgen", "0019_run_table_sort_indexes")]
AFTER = [("review", "0011_labels_move_to_taskgen_state"), ("taskgen", "0020_labels_from_review_state")]


def _migrate(targets) -> object:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _old_rows(apps) -> dict:
    """A run, an episode, a reviewer's label with its history, a final label and a check, made by the old models."""
    user = apps.get_model("auth", "User").objects.create(username="kept-reviewer")
    site = apps.get_model("taskgen", "Site").objects.create(slug="shop", name="Shop")
    task = apps.get_model("taskgen", "Task").objects.create(task_id="t-1", site=site, instruction="Buy a mug")
    run = apps.get_model("taskgen", "Run").objects.create(name="before-the-move")
    episode = apps.get_model("taskgen", "Episode").objects.create(run=run, task=task, site=site)
    label = apps.get_model("review", "Label").objects.create(episode=episode, reviewer=user, verdict="NOT SUCCESS",
                                                             note="the mug was never added")
    apps.get_model("review", "LabelChange").objects.create(label=label, changed_by=user, before=None,
                                                           after={"verdict": "NOT SUCCESS"})
    apps.get_model("review", "FinalLabel").objects.create(episode=episode, verdict="NOT SUCCESS")
    queue = apps.get_model("review", "Queue").objects.create(name="audit")
    apps.get_model("review", "ReviewerCheck").objects.create(episode=episode, reviewer=user, queue=queue, truth=False)
    return {"episode": episode.pk, "queue": queue.pk, "user": user.pk}


def test_labels_made_before_the_move_are_there_after_it_and_after_going_back():
    try:
        made = _old_rows(_migrate(BEFORE))
        apps = _migrate(AFTER)
        label = apps.get_model("taskgen", "Label").objects.get(episode_id=made["episode"])
        assert (label.verdict, label.note, label.reviewer_id) == ("NOT SUCCESS", "the mug was never added",
                                                                  made["user"])
        assert apps.get_model("taskgen", "LabelChange").objects.filter(label=label).count() == 1
        assert apps.get_model("taskgen", "FinalLabel").objects.get(episode_id=made["episode"]).verdict == "NOT SUCCESS"
        check = apps.get_model("taskgen", "ReviewerCheck").objects.get(episode_id=made["episode"])
        assert check.queue_id == made["queue"]
        old = _migrate(BEFORE)
        assert old.get_model("review", "Label").objects.get(episode_id=made["episode"]).note == \
            "the mug was never added"
        apps = _migrate(AFTER)
        # the queue can go without taking the check's record with it (its queue is a plain id now)
        apps.get_model("review", "Queue").objects.filter(pk=made["queue"]).delete()
        assert apps.get_model("taskgen", "ReviewerCheck").objects.filter(episode_id=made["episode"]).exists()
    finally:
        _migrate(_latest())


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
