"""Two imports that meet the same new rows (tasks, sites, a screenshot's blob row), released together by a barrier
(PostgreSQL): both finish and each row is stored once, whatever order their files list them in. Their writes take
the rows' locks in one order (task id, site slug, sha), so two imports never wait on each other in a cycle, which
PostgreSQL ends by failing one import ("deadlock detected")."""
from __future__ import annotations

import hashlib

import pytest
from django.db import connection, transaction

from taskgen.blobs import CheckedImage, blob_rows_ensure
from taskgen.models import Blob, Site, Task
from taskgen.stages.import_.tasks_file import TaskLine, TaskSet, tasks_save
from tests.concurrency import together

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's to race")]
TASKS = 3000


def _lines(task_ids: list[str], *, site_each: bool = False) -> dict[str, TaskLine]:
    """Tasks file lines; all of site `shop`, or (site_each) each of a site of its own, named as the task."""
    return {task_id: TaskLine(task_id=task_id, order=number, site_slug=task_id if site_each else "shop",
                              data={"task_id": task_id, "site": task_id if site_each else "shop",
                                    "instruction": f"do {task_id}"})
            for number, task_id in enumerate(task_ids, start=1)}


def _race(files: list[dict[str, TaskLine]]) -> tuple[list[TaskSet], list[BaseException]]:
    return together([lambda lines=lines: tasks_save(lines=lines) for lines in files])


# A deadlock needs the two writes to overlap: without the order, 5 runs in 6 met one here.
@pytest.mark.parametrize("attempt", range(2))
def test_two_imports_sharing_tasks_in_opposite_orders_both_finish(attempt):
    Site.objects.create(slug="shop", name="shop")  # an earlier import's: a new site would make the second wait
    task_ids = [f"shop-{n:04d}" for n in range(TASKS)]
    saved, errors = _race([_lines(task_ids), _lines(task_ids[::-1])])
    assert errors == []
    assert Task.objects.count() == TASKS
    assert [len(task_set.tasks) for task_set in saved] == [TASKS, TASKS]
    assert sum(task_set.added for task_set in saved) == TASKS  # each task counted by the import that made it


@pytest.mark.parametrize("attempt", range(2))
def test_two_imports_sharing_new_sites_in_opposite_orders_both_finish(attempt):
    task_ids = [f"site-{n:04d}" for n in range(TASKS // 3)]
    saved, errors = _race([_lines(task_ids, site_each=True), _lines(task_ids[::-1], site_each=True)])
    assert errors == []
    assert (Site.objects.count(), Task.objects.count()) == (TASKS // 3, TASKS // 3)
    assert [len(task_set.tasks) for task_set in saved] == [TASKS // 3, TASKS // 3]
    assert sum(task_set.added for task_set in saved) == TASKS // 3


def _images(count: int) -> list[CheckedImage]:
    return [CheckedImage(sha256=hashlib.sha256(str(n).encode()).hexdigest(), size=n + 1, content_type="image/png",
                         width=1, height=1) for n in range(count)]


# Two imports' batches that meet the same screenshots (a site's home page, byte for byte) write their blob rows in
# one transaction each: in sha order, whatever their episodes' order, they never wait on each other in a cycle.
@pytest.mark.parametrize("attempt", range(2))
def test_two_imports_sharing_screenshots_in_opposite_orders_both_finish(attempt):
    images = _images(TASKS)

    def batch(order: list[CheckedImage]) -> dict[str, int]:
        with transaction.atomic():  # an import's batch: its blob rows stay locked until it commits
            return blob_rows_ensure(images=order)

    ids, errors = together([lambda order=order: batch(order) for order in (images, images[::-1])])
    assert errors == []
    assert Blob.objects.count() == TASKS
    assert ids[0] == ids[1] == dict(Blob.objects.values_list("sha256", "id"))
