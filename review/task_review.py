"""Humans on proposed tasks: admins approve, drop, restore and edit; reviewers flag. Every change is a TaskEdit row
(who, when, the fields before and after), written in the same transaction as the change."""
from __future__ import annotations

from django.db import transaction

from taskgen.models import Site, Task, TaskEdit
from taskgen.stages.propose.keep import MIN_INSTRUCTION

REVIEWED_FIELDS = ("instruction", "task_kind", "review_state", "review_flag")
STATE_OF_ACTION = {TaskEdit.Action.APPROVE: Task.ReviewState.APPROVED, TaskEdit.Action.DROP: Task.ReviewState.DROPPED,
                   TaskEdit.Action.RESTORE: Task.ReviewState.PROPOSED}
FLAG_LIMIT = 500


class TaskReviewError(ValueError):
    """A change the rules refuse (an instruction too short, an unknown action); the message says why."""


def task_fields(task: Task) -> dict:
    return {name: getattr(task, name) for name in REVIEWED_FIELDS}


def tasks_state_set(*, site: Site, task_ids: list[int], action: str, user) -> int:
    """Approve, drop or restore the site's tasks among `task_ids`; tasks already in that state are left alone.
    Returns how many changed."""
    if action not in STATE_OF_ACTION:
        raise TaskReviewError(f"unknown action {action!r}: approve, drop or restore")
    state = STATE_OF_ACTION[action]
    with transaction.atomic():
        tasks = list(Task.objects.select_for_update().filter(site=site, pk__in=task_ids).exclude(review_state=state))
        edits = []
        for task in tasks:
            before = task_fields(task)
            task.review_state = state
            edits.append(TaskEdit(task=task, user=user, action=action, before=before, after=task_fields(task)))
        Task.objects.bulk_update(tasks, ["review_state"])
        TaskEdit.objects.bulk_create(edits)
    return len(tasks)


def task_edit(*, task: Task, instruction: str, task_kind: str, user) -> bool:
    """Change a task's instruction and kind (its id stays: episodes and labels refer to it); False when nothing
    changed."""
    instruction = " ".join(instruction.split())
    if len(instruction) < MIN_INSTRUCTION:
        raise TaskReviewError(f"an instruction needs at least {MIN_INSTRUCTION} characters")
    if task_kind not in Task.Kind.values:
        raise TaskReviewError("the kind is info or action")
    return _change(task, user, TaskEdit.Action.EDIT, instruction=instruction, task_kind=task_kind)


def task_flag(*, task: Task, note: str, user) -> bool:
    """A reviewer's note asking an admin to look at the task ('' takes the flag down)."""
    return _change(task, user, TaskEdit.Action.FLAG, review_flag=" ".join(note.split())[:FLAG_LIMIT])


def _change(task: Task, user, action: str, **values) -> bool:
    with transaction.atomic():
        locked = Task.objects.select_for_update().get(pk=task.pk)
        before = task_fields(locked)
        for name, value in values.items():
            setattr(locked, name, value)
        if task_fields(locked) == before:
            return False
        locked.save(update_fields=list(values))
        TaskEdit.objects.create(task=locked, user=user, action=action, before=before, after=task_fields(locked))
    task.refresh_from_db()
    return True
