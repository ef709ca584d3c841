"""Template filters of the runs pages: a run's duration in words, what it says when it had nothing to do, and its
result summary (review/pipeline_summary.py)."""
from __future__ import annotations

from django import template

from review.pipeline_summary import SummaryRow, result_rows, run_duration
from taskgen.engine.stage_table import UnknownStage, stage_work
from taskgen.models import PipelineRun

register = template.Library()


@register.filter
def duration(pr: PipelineRun) -> str:
    return run_duration(pr)


@register.filter
def nothing_to_do(pr: PipelineRun) -> str:
    """The stage's own words ("nothing to judge: ...") for a finished engine run that had no units; else empty.
    Read from the stage, not the run's result, so the runs list needs no extra query per row."""
    if pr.status != PipelineRun.Status.DONE or pr.total:
        return ""
    try:
        return stage_work(pr.stage).nothing_to_do
    except UnknownStage:
        return ""


@register.filter
def summary_rows(pr: PipelineRun) -> list[SummaryRow]:
    return result_rows(pr.result) if pr.is_finished else []
