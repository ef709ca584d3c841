"""Reads that pages need, one function per query shape, so a page's query count does not grow with its rows."""
from __future__ import annotations

from django.db.models import Count, Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from taskgen.models import Episode, Export, Judgment, PipelineRun, Run, Screenshot


def runs_with_counts() -> QuerySet[Run]:
    return Run.objects.annotate(episode_count=Count("episodes")).order_by("-created_at")


def run_episodes(run: Run) -> QuerySet[Episode]:
    return (
        Episode.objects.filter(run=run)
        .select_related("task", "site", "verifier_result")
        .only("id", "run_id", "task_order", "status", "steps", "task__task_id", "task__instruction",
              "site__slug", "task_kind", "verifier_result__ok", "verifier_result__source")
        .order_by("task_order", "id")
    )


def episode_for_page(pk: int) -> Episode:
    screenshots = Screenshot.objects.select_related("blob").exclude(kind=Screenshot.Kind.ROW).order_by("kind", "step")
    judgments = Judgment.objects.select_related("config").order_by("config__provider", "config__model")
    queryset = Episode.objects.select_related("run", "task", "site").prefetch_related(
        Prefetch("screenshots", queryset=screenshots, to_attr="screens"),
        Prefetch("judgments", queryset=judgments, to_attr="judgment_list"),
    )
    return get_object_or_404(queryset, pk=pk)


def pipeline_runs() -> QuerySet[PipelineRun]:
    return PipelineRun.objects.select_related("started_by", "run").defer("result").order_by("-created_at")


def exports() -> QuerySet[Export]:
    return Export.objects.select_related("created_by", "judge_config").prefetch_related("runs").order_by("-created_at")
