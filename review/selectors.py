"""Reads that pages need, one function per query shape, so a page's query count does not grow with its rows."""
from __future__ import annotations

from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When
from django.db.models.fields.json import KT

from taskgen.models import Export, JudgeBatchJob, PipelineRun, Run, Screenshot

# Steps in numeric order, then the final screen; row images (training copies) are not the episode's evidence.
_SCREEN_ORDER = Case(When(kind=Screenshot.Kind.STEP, then=Value(0)), default=Value(1), output_field=IntegerField())


def runs_with_counts() -> QuerySet[Run]:
    return Run.objects.annotate(
        episode_count=Count("episodes", distinct=True),
        verified_count=Count("episodes__verifier_result", distinct=True),
        judged_count=Count("episodes", filter=Q(episodes__judgments__isnull=False), distinct=True),
    ).order_by("-created_at")


def episode_screens() -> QuerySet[Screenshot]:
    """An episode's screens as the judge and a reviewer read them: steps by number, the final screen last."""
    return (Screenshot.objects.select_related("blob").exclude(kind=Screenshot.Kind.ROW)
            .annotate(screen_order=_SCREEN_ORDER).order_by("screen_order", "step", "id"))


def pipeline_runs() -> QuerySet[PipelineRun]:
    return PipelineRun.objects.select_related("started_by", "run").defer("result").order_by("-created_at")


def judge_batch_jobs(*, pipeline_run_id: int) -> QuerySet[JudgeBatchJob]:
    """A batch judge run's Gemini jobs, oldest first, each with how many episodes it holds."""
    return (JudgeBatchJob.objects.filter(pipeline_run_id=pipeline_run_id).annotate(episodes=Count("requests"))
            .order_by("pk"))


def exports() -> QuerySet[Export]:
    return Export.objects.select_related("created_by", "judge_config").prefetch_related("runs").order_by("-created_at")


def exports_listed() -> QuerySet[Export]:
    """The export list's rows without their manifests (megabytes each at full size: the whole episode list); the
    few figures the list shows are read out of the manifest by the database."""
    return exports().defer("manifest").annotate(
        listed_budget=KT("manifest__params__budget"),
        listed_trajectories=KT("manifest__report__selected_trajectories"),
        listed_rows=KT("manifest__report__selected_rows"), listed_sites=KT("manifest__report__sites"))
