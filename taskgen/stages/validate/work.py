"""The validate stage as the engine runs it: one unit (the figures come from one grouped scan); its result is the
report the page shows."""
from __future__ import annotations

import json
from dataclasses import dataclass

from taskgen.engine.contract import StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.models import JudgeConfig, PipelineRun, Run, WorkUnit
from taskgen.stages.validate.service import validate_compute

UNIT = "report"
AGAINST = ("verifier", "human")


@dataclass(frozen=True)
class ValidateParams(StageParams):
    """Which runs, which judge config, against which truth."""

    runs: list
    config: int
    against: str = "verifier"


def validate_params_check(raw: dict) -> ValidateParams:
    try:
        runs, config = [int(pk) for pk in raw.get("runs") or []], int(raw.get("config") or 0)
    except (TypeError, ValueError) as exc:
        raise StageParamsError(f"runs and config must be ids: {exc}") from exc
    if not runs or Run.objects.filter(pk__in=runs).count() != len(set(runs)):
        raise StageParamsError("choose one or more runs that exist")
    if not JudgeConfig.objects.filter(pk=config).exists():
        raise StageParamsError(f"there is no judge config {config}")
    if raw.get("against", "verifier") not in AGAINST:
        raise StageParamsError(f"against must be one of {', '.join(AGAINST)}")
    return ValidateParams(runs=runs, config=config, against=raw.get("against", "verifier"))


def _do(pipeline_run: PipelineRun, params: ValidateParams, key: str) -> dict:
    report = validate_compute(runs=Run.objects.filter(pk__in=params.runs),
                              config=JudgeConfig.objects.get(pk=params.config), against=params.against)
    summary = report.as_dict() if hasattr(report, "as_dict") else report
    return json.loads(json.dumps(summary if isinstance(summary, dict) else {"summary": str(summary)}, default=str))


def _finish(pipeline_run: PipelineRun, params: ValidateParams, failed: int) -> dict:
    unit = WorkUnit.objects.filter(pipeline_run=pipeline_run, key=UNIT).values("result", "last_error").first()
    return (unit or {}).get("result") or {"error": (unit or {}).get("last_error", "")}


VALIDATE_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.VALIDATE, check=validate_params_check, read=ValidateParams.from_json,
    units=lambda p: [UNIT], do=_do, finish=_finish, queue="default", batch=1, unit_seconds=1800,
))
