"""Reads of the Tasks pages, one function per query shape (a fixed number of queries however many tasks)."""
from __future__ import annotations

from django.db.models import Count, Q, QuerySet, Sum

from taskgen.models import PipelineRun, ProposalBatch, Site, Task, TaskEdit, WorkUnit
from taskgen.providers import provider_can

STATE_FILTERS = {"proposed": Q(review_state=Task.ReviewState.PROPOSED),
                 "approved": Q(review_state=Task.ReviewState.APPROVED),
                 "dropped": Q(review_state=Task.ReviewState.DROPPED),
                 "flagged": ~Q(review_flag=""), "ungrounded": ~Q(grounding_note="")}


def sites_with_task_counts() -> QuerySet[Site]:
    return Site.objects.annotate(
        task_count=Count("tasks"),
        proposed_count=Count("tasks", filter=Q(tasks__review_state=Task.ReviewState.PROPOSED)),
        approved_count=Count("tasks", filter=Q(tasks__review_state=Task.ReviewState.APPROVED)),
        dropped_count=Count("tasks", filter=Q(tasks__review_state=Task.ReviewState.DROPPED)),
        flagged_count=Count("tasks", filter=~Q(tasks__review_flag="")),
        ungrounded_count=Count("tasks", filter=~Q(tasks__grounding_note="")),
    ).order_by("slug")


def site_tasks(*, site: Site, show: str = "") -> QuerySet[Task]:
    """The site's tasks in the order they were proposed (imported ones first), narrowed by `show`."""
    tasks = Task.objects.filter(site=site).select_related("proposal_batch")
    if show in STATE_FILTERS:
        tasks = tasks.filter(STATE_FILTERS[show])
    return tasks.order_by("created_at", "pk")


def site_task_summary(*, site: Site) -> dict:
    """Counts above the site's task table: states, kind mix, flags, and what the proposers dropped."""
    counts = Task.objects.filter(site=site).aggregate(
        total=Count("pk"), info=Count("pk", filter=Q(task_kind=Task.Kind.INFO)),
        action=Count("pk", filter=Q(task_kind=Task.Kind.ACTION)),
        **{name: Count("pk", filter=condition) for name, condition in STATE_FILTERS.items()})
    batches = ProposalBatch.objects.filter(site=site).aggregate(
        batches=Count("pk"), duplicates=Sum("duplicates"), invalid=Sum("invalid"),
        unreadable=Count("pk", filter=~Q(answer_error="")))
    proposers = list(ProposalBatch.objects.filter(site=site).values("provider", "model").annotate(
        batches=Count("pk"), kept=Sum("kept")).order_by("provider", "model"))
    for proposer in proposers:
        proposer["offline"] = provider_can(proposer["provider"], "offline")
    return {**counts, **{k: v or 0 for k, v in batches.items()}, "proposers": proposers}


def task_history(*, task: Task) -> QuerySet[TaskEdit]:
    return TaskEdit.objects.filter(task=task).select_related("user").order_by("-at", "-pk")


def proposing_now() -> list[dict]:
    """Progress per site of the propose runs still running: batches settled of all, tasks kept so far."""
    runs = list(PipelineRun.objects.filter(stage=PipelineRun.Stage.PROPOSE, status=PipelineRun.Status.RUNNING)
                .order_by("pk").values_list("pk", flat=True)[:20])
    progress: dict[tuple[int, str], dict] = {}
    units = WorkUnit.objects.filter(pipeline_run_id__in=runs).values_list("pipeline_run_id", "key", "status")
    for run, key, status in units:
        row = progress.setdefault((run, key.rsplit(":", 1)[0]), {"run": run, "site": key.rsplit(":", 1)[0],
                                                                 "settled": 0, "batches": 0, "kept": 0})
        row["batches"] += 1
        row["settled"] += status in (WorkUnit.Status.DONE, WorkUnit.Status.FAILED)
    kept = Task.objects.filter(proposal_batch__pipeline_run_id__in=runs).values_list(
        "proposal_batch__pipeline_run_id", "site__slug").annotate(count=Count("pk"))
    for run, slug, count in kept:
        if (run, slug) in progress:
            progress[(run, slug)]["kept"] = count
    return list(progress.values())
