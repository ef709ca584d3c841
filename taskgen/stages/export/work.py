"""The export stage as the engine runs it: one unit per selected episode (its rows folder), so progress, cancel and
resume are per episode, leased settings.EXPORT_BATCH (100) at a time and written together (one query, a few writer
threads); `finish` writes _report.json and _manifest.json and records the Export, once.

The episode list is chosen once, when the run starts (`export_params_check`), and kept as a content-addressed file
(DATA_ROOT/.export-manifests/<sha256>.json, named in the run's parameters), so every worker and every resume writes
exactly the episodes that were selected.
"""
from __future__ import annotations

import json
import os
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from taskgen.engine.contract import StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.models import Export, JudgeConfig, PipelineRun, Run
from taskgen.stages.export.output import certificate_write, episodes_write
from taskgen.stages.export.select import (
    ExportError,
    export_manifest,
    export_select,
    manifest_left_out_words,
    manifest_sha256,
    manifest_write,
    report_bytes,
)
from taskgen.stages.export.service import export_certificate_add, export_out_dir_check, export_row_create


@dataclass(frozen=True)
class ExportParams(StageParams):
    """The folder to write and the selected episode list (by its sha256); the selection's own parameters (run,
    source, judge config, budget) live once, in the manifest."""

    run: int
    out_dir: str
    manifest_sha256: str
    source: str = Export.Selection.JUDGE
    judge_config: int | None = None


def _manifests() -> Path:
    return Path(settings.DATA_ROOT) / ".export-manifests"


def export_params_check(raw: dict) -> ExportParams:
    """Check the parameters and choose the episodes now (so the admin sees a bad value at once, and every worker
    writes the same list): ExportError (a StageParamsError's message) on bad input; nothing is written then."""
    run = Run.objects.filter(pk=raw.get("run") or 0).first()
    if run is None:
        raise StageParamsError(f"there is no run {raw.get('run')!r} to export")
    config = JudgeConfig.objects.filter(pk=raw["judge_config"]).first() if raw.get("judge_config") else None
    try:
        out = export_out_dir_check(out_dir=raw.get("out_dir") or "")
        selection = export_select(run=run, source=raw.get("source") or Export.Selection.JUDGE, judge_config=config,
                                  budget=raw.get("budget"),
                                  include_reviewer_rejected=bool(raw.get("include_reviewer_rejected")),
                                  include_verifier_failed=bool(raw.get("include_verifier_failed")),
                                  exclude_risk=raw.get("exclude_risk") or ())
        manifest = export_manifest(selection=selection)
        export_certificate_add(manifest=manifest, selection=selection, target=raw.get("certify"),
                               confidence=raw.get("confidence"))
    except ExportError as exc:
        raise StageParamsError(str(exc)) from exc
    _manifests().mkdir(parents=True, exist_ok=True)
    written = _manifests() / f".new-{uuid.uuid4().hex}.json"
    sha = manifest_write(manifest, written)  # encoded once, piece by piece; named by its hash once written
    os.replace(written, _manifests() / f"{sha}.json")
    _manifest_keep(sha, manifest)  # this process works the run too (`taskgen rows`): no second parse and hash
    return ExportParams(run=run.pk, out_dir=str(out), manifest_sha256=sha, source=selection.source,
                        judge_config=config.pk if config else None)


_KEPT = 4  # manifests kept in memory per process: a worker works a few export runs at a time at most
_kept: OrderedDict[str, dict] = OrderedDict()
_kept_lock = threading.Lock()


def _manifest_keep(sha: str, manifest: dict) -> None:
    with _kept_lock:
        _kept[sha] = manifest
        _kept.move_to_end(sha)
        while len(_kept) > _KEPT:
            _kept.popitem(last=False)


def export_manifest_read(sha: str) -> dict:
    """The manifest a run selected, checked against its sha256 when read from disk (kept in memory after)."""
    with _kept_lock:
        manifest = _kept.get(sha)
    if manifest is not None:
        return manifest
    data = (_manifests() / f"{sha}.json").read_bytes()
    manifest = json.loads(data)
    if manifest_sha256(manifest) != sha:
        raise ExportError(f"the selected episode list {sha} was changed on disk")
    _manifest_keep(sha, manifest)
    return manifest


def export_left_out_words(*, pipeline_run: PipelineRun) -> str:
    """What an export run selected and left out, and why, in one sentence (its manifest is chosen at start)."""
    return manifest_left_out_words(export_manifest_read(pipeline_run.params["manifest_sha256"]))


@lru_cache(maxsize=4)
def _entries(sha: str) -> dict[str, dict]:
    return {entry["task_id"]: entry for entry in export_manifest_read(sha)["episodes"]}


def _units(params: ExportParams) -> list[str]:
    return [entry["task_id"] for entry in export_manifest_read(params.manifest_sha256)["episodes"]]


def _do_batch(pipeline_run: PipelineRun, params: ExportParams, keys: list[str]) -> dict[str, object]:
    """Write a batch of episodes' folders: their text in one query, the files by a few threads."""
    entries = _entries(params.manifest_sha256)
    written = episodes_write(entries=[entries[key] for key in keys], out=Path(params.out_dir))
    return {key: None if isinstance(outcome, bool) else outcome for key, outcome in written.items()}


def _finish(pipeline_run: PipelineRun, params: ExportParams, failed: int) -> dict:
    """With every episode written: _report.json, _manifest.json and the Export row (once, whoever finishes)."""
    manifest = export_manifest_read(params.manifest_sha256)
    if failed:  # the run fails (its result says why); a resume writes only the episodes not written
        raise ExportError(f"{failed} episode(s) could not be written; resume the run to write them (the written "
                          "ones are kept)")
    out = Path(params.out_dir)
    out.mkdir(parents=True, exist_ok=True)  # no episode to write made no folder: the reference writes its report anyway
    (out / "_report.json").write_bytes(report_bytes(manifest["report"]))
    certificate_write(manifest, out)
    sha = manifest_write(manifest, out / "_manifest.json")
    export = Export.objects.filter(params__pipeline_run=pipeline_run.pk).only("pk").first() or export_row_create(
        run=Run.objects.get(pk=params.run), manifest=manifest, out_dir=str(out), user=pipeline_run.started_by,
        judge_config=JudgeConfig.objects.filter(pk=params.judge_config).first() if params.judge_config else None,
        extra={"pipeline_run": pipeline_run.pk}, sha256=sha)
    report = manifest["report"]
    return {"export_id": export.pk, "manifest_sha256": params.manifest_sha256,
            "selected_trajectories": report["selected_trajectories"], "selected_rows": report["selected_rows"],
            "left_out": manifest_left_out_words(manifest)}


EXPORT_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.EXPORT, check=export_params_check, read=ExportParams.from_json, units=_units,
    finish=_finish, queue="default", batch=settings.EXPORT_BATCH, max_attempts=3, do_batch=_do_batch,
    nothing_to_do="nothing to export: no approved episode with rows in this run",
    run_of=lambda params: params.run,
))
