"""Two imports whose tasks files share tasks, released together by a barrier (PostgreSQL): both finish and each
task is stored once, whatever order each file lists them in (their writes take the rows' locks in one order, task
id order, so two imports never wait on each other in a cycle, which PostgreSQL would end by failing one)."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from taskgen.models import Site, Task
from taskgen.stages.import_.tasks_file import TaskLine, TaskSet, tasks_save

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's to race")]
TASKS = 3000


def _lines(task_ids: list[str]) -> dict[str, TaskLine]:
    return {task_id: TaskLine(task_id=task_id, order=number, site_slug="shop",
                              data={"task_id": task_id, "site": "shop", "instruction": f"do {task_id}"})
            for number, task_id in enumerate(task_ids, start=1)}


def _race(files: list[dict[str, TaskLine]]) -> tuple[list[TaskSet], list[BaseException]]:
    barrier, saved, errors = threading.Barrier(len(files)), [], []

    def save(lines: dict[str, TaskLine]) -> None:
        try:
            barrier.wait()
            saved.append(tasks_save(lines=lines))
        except BaseException as exc:  # noqa: BLE001 - the test reports every thread's failure
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(lines,)) for lines in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return saved, errors


# A deadlock needs the two writes to overlap: without the order, 5 runs in 6 met one here.
@pytest.mark.parametrize("attempt", range(2))
def test_two_imports_sharing_tasks_in_opposite_orders_both_finish(attempt):
    Site.objects.create(slug="shop", name="shop")  # an earlier import's: a new site would make the second wait
    task_ids = [f"shop-{n:04d}" for n in range(TASKS)]
    saved, errors = _race([_lines(task_ids), _lines(task_ids[::-1])])
    assert errors == []
    assert Task.objects.count() == TASKS
    assert [len(task_set.tasks) for task_set in saved] == [TASKS, TASKS]
