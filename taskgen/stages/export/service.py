"""Export services: an export made at once (the command line, a download-only export from the page) or in the
background as a PipelineRun that can be cancelled and resumed; both end in an Export row with its manifest.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction

from taskgen.models import Export, JudgeConfig, PipelineRun, Run
from taskgen.pipeline_runs import (
    pipeline_run_create,
    pipeline_run_error,
    pipeline_run_finish,
    pipeline_run_is_cancelled,
    pipeline_run_start,
    pipeline_run_step,
)
from taskgen.stages.export.output import export_write_dir
from taskgen.stages.export.select import (
    ExportError,
    export_budget_check,
    export_manifest,
    export_select,
    export_source_check,
    manifest_sha256,
)
from taskgen.stages.paths import PathError, empty_dir_under_data_root


def export_out_dir_check(*, out_dir: str | Path, base: Path | None = None) -> Path:
    """The folder to write: under the data root, missing or empty; an ExportError otherwise."""
    try:
        return empty_dir_under_data_root(raw=out_dir, base=base)
    except PathError as exc:
        raise ExportError(str(exc)) from exc


def _export_row(*, run: Run, manifest: dict, judge_config: JudgeConfig | None, out_dir: str, user,
                params: dict) -> Export:
    export = Export.objects.create(
        selection=manifest["params"]["source"], judge_config=judge_config, budget=manifest["params"]["budget"],
        params=params, report=manifest["report"], manifest=manifest, manifest_sha256=manifest_sha256(manifest),
        out_dir=out_dir, created_by=user,
    )
    export.runs.add(run)
    return export


def export_create(*, run: Run, source: str, judge_config: JudgeConfig | None = None, budget: object = None,
                  out_dir: str | Path | None = None, base: Path | None = None, user=None) -> Export:
    """Select, write the folder when `out_dir` is given (checked first: nothing is written on bad input), and
    record the Export. A folder that cannot be completed raises ExportError after keeping what was written."""
    out = export_out_dir_check(out_dir=out_dir, base=base) if out_dir else None
    selection = export_select(run=run, source=source, judge_config=judge_config, budget=budget)
    manifest = export_manifest(selection=selection)
    if out is not None:
        outcome = export_write_dir(manifest=manifest, out=out)
        if not outcome.complete:
            failed = "; ".join(outcome.errors[:5])
            raise ExportError(f"{len(outcome.errors)} episode(s) could not be written: {failed}")
    params = {**selection.params(), "out_dir": str(out) if out else ""}
    return _export_row(run=run, manifest=manifest, judge_config=judge_config, out_dir=str(out or ""), user=user,
                       params=params)


def export_prepare(*, run: Run, source: str, judge_config: JudgeConfig | None = None, budget: object = None,
                   out_dir: str | Path, user=None) -> PipelineRun:
    """Check the parameters now (so the admin sees a bad one at once); the export's PipelineRun, for the caller to
    queue."""
    out = export_out_dir_check(out_dir=out_dir)
    budget = export_budget_check(settings.EXPORT_BUDGET if budget is None else budget)
    export_source_check(source=source, judge_config=judge_config)
    params = {"run": run.pk, "source": source, "judge_config": judge_config.pk if judge_config else None,
              "budget": budget, "out_dir": str(out)}
    return pipeline_run_create(stage=PipelineRun.Stage.EXPORT, params=params, user=user, run=run)


def _selected_manifest(pipeline_run: PipelineRun, out: Path) -> dict:
    """The manifest chosen on the first run, kept in the PipelineRun so a resume writes exactly the same episodes."""
    manifest = (pipeline_run.result or {}).get("manifest")
    if manifest:
        return manifest
    export_out_dir_check(out_dir=out)  # it may have been filled since the run was queued
    params = pipeline_run.params
    config = JudgeConfig.objects.filter(pk=params.get("judge_config")).first()
    selection = export_select(run=pipeline_run.run, source=params["source"], judge_config=config,
                              budget=params["budget"])
    manifest = export_manifest(selection=selection)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(result={"manifest": manifest}, total=len(selection.picked))
    return manifest


def export_run(*, pipeline_run_id: int) -> None:
    """The background export: write what is not written yet, counting each episode; stop when cancelled."""
    if not pipeline_run_start(pipeline_run_id=pipeline_run_id):
        return  # cancelled while queued: dropped
    pipeline_run = PipelineRun.objects.select_related("run", "started_by").get(pk=pipeline_run_id)
    out = Path(pipeline_run.params["out_dir"])
    try:
        manifest = _selected_manifest(pipeline_run, out)
        already = sum((out / e["task_id"]).is_dir() for e in manifest["episodes"])
        PipelineRun.objects.filter(pk=pipeline_run_id).update(done=already, failed=0)
        outcome = export_write_dir(
            manifest=manifest, out=out,
            on_episode=lambda ok, error: pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=ok, error=error),
            should_stop=lambda: pipeline_run_is_cancelled(pipeline_run_id=pipeline_run_id))
    except (ExportError, OSError) as exc:
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=str(exc))
        pipeline_run_finish(pipeline_run_id=pipeline_run_id, failed=True)
        return
    if outcome.stopped:
        return
    result = {"manifest": manifest}
    if outcome.complete:
        result["export_id"] = _export_once(pipeline_run, manifest, out).pk
    pipeline_run_finish(pipeline_run_id=pipeline_run_id, result=result, failed=not outcome.complete)


def _export_once(pipeline_run: PipelineRun, manifest: dict, out: Path) -> Export:
    # A redelivered task must not record the same export twice.
    with transaction.atomic():
        locked = PipelineRun.objects.select_for_update().get(pk=pipeline_run.pk)
        existing = (locked.result or {}).get("export_id")
        if existing and Export.objects.filter(pk=existing).exists():
            return Export.objects.get(pk=existing)
        config = JudgeConfig.objects.filter(pk=pipeline_run.params.get("judge_config")).first()
        params = {**manifest["params"], "out_dir": str(out), "pipeline_run": pipeline_run.pk}
        export = _export_row(run=pipeline_run.run, manifest=manifest, judge_config=config, out_dir=str(out),
                             user=pipeline_run.started_by, params=params)
        PipelineRun.objects.filter(pk=pipeline_run.pk).update(result={"manifest": manifest, "export_id": export.pk})
        return export

