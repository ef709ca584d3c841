"""Template filters of the runs pages: a run's duration in words, what it says when it had nothing to do, and its
result summary (review/pipeline_summary.py)."""
from __future__ import annotations

from django import template

from review.pipeline_summary import SummaryRow, parameter_rows, result_rows, run_duration
from taskgen.engine.stage_table import stage_found
from taskgen.models import PipelineRun

register = template.Library()


@register.filter
def duration(pr: PipelineRun) -> str:
    return run_duration(pr)


@register.filter
def nothing_to_do(pr: PipelineRun) -> str:
    """The stage's own words ("nothing to judge: ...") for a finished engine run that had no units; else empty.
    Read from the stage, not the run's result, so the runs list needs no extra query per row."""
    work = stage_found(pr.stage) if pr.status == PipelineRun.Status.DONE and not pr.total else None
    return work.nothing_to_do if work else ""


@register.filter
def parameters(pr: PipelineRun) -> list[SummaryRow]:
    return parameter_rows(pr.params)


@register.filter
def summary_rows(pr: PipelineRun) -> list[SummaryRow]:
    return result_rows(pr.result) if pr.is_finished else []
