"""Export services: an export made at once (the command line, a download-only export from the page); the background
export, on the engine, is taskgen/stages/export/work.py. Both end in an Export row with its manifest.
"""
from __future__ import annotations

from pathlib import Path

from taskgen.models import Export, JudgeConfig, Run
from taskgen.stages.certify.target import CertifyError, certify_target_check
from taskgen.stages.export.output import export_write_dir
from taskgen.stages.export.select import (
    ExportError,
    Selection,
    export_manifest,
    export_select,
    manifest_sha256,
)
from taskgen.stages.paths import PathError, empty_dir_under_data_root


def export_out_dir_check(*, out_dir: str | Path, base: Path | None = None) -> Path:
    """The folder to write: under the data root, missing or empty; an ExportError otherwise."""
    try:
        return empty_dir_under_data_root(raw=out_dir, base=base)
    except PathError as exc:
        raise ExportError(str(exc)) from exc


def export_row_create(*, run: Run, manifest: dict, judge_config: JudgeConfig | None, out_dir: str, user,
                      extra: dict | None = None, sha256: str | None = None) -> Export:
    """The Export row of a finished export: what chose it is the manifest's; params adds only the folder (and the
    pipeline run that wrote it). `sha256`: the manifest's, when the caller has hashed it already."""
    export = Export.objects.create(
        selection=manifest["params"]["source"], judge_config=judge_config,
        params={"out_dir": out_dir, **(extra or {})}, manifest=manifest,
        manifest_sha256=sha256 or manifest_sha256(manifest), out_dir=out_dir, created_by=user,
    )
    export.runs.add(run)
    return export


def export_certificate_add(*, manifest: dict, selection: Selection, target: object, confidence: object = None,
                           user=None) -> None:
    """The gate: with a target ("certified at least"), put the certificate of exactly the selected episodes in the
    manifest, or refuse (ExportError saying how many more labels are likely needed) when its bound is below."""
    try:
        target = certify_target_check(target)
        if target is None:
            return
        # The certificate's statistics (numpy) load with the first export that asks for one, not with the stage.
        from taskgen.stages.certify.service import certificate_gate

        confidence = 0.95 if confidence in (None, "") else certify_target_check(confidence)
        manifest["certificate"] = certificate_gate(selection=selection, target=target, confidence=confidence,
                                                   user=user)
    except CertifyError as exc:
        raise ExportError(str(exc)) from exc


def export_create(*, run: Run, source: str, judge_config: JudgeConfig | None = None, budget: object = None,
                  out_dir: str | Path | None = None, base: Path | None = None, user=None,
                  include_reviewer_rejected: bool = False, include_verifier_failed: bool = False,
                  exclude_risk=(), certify: object = None, confidence: object = None) -> Export:
    """Select, write the folder when `out_dir` is given (checked first: nothing is written on bad input), and
    record the Export. A folder that cannot be completed raises ExportError after keeping what was written."""
    out = export_out_dir_check(out_dir=out_dir, base=base) if out_dir else None
    selection = export_select(run=run, source=source, judge_config=judge_config, budget=budget,
                              include_reviewer_rejected=include_reviewer_rejected,
                              include_verifier_failed=include_verifier_failed, exclude_risk=exclude_risk)
    manifest = export_manifest(selection=selection)
    export_certificate_add(manifest=manifest, selection=selection, target=certify, confidence=confidence, user=user)
    sha256 = None
    if out is not None:
        outcome = export_write_dir(manifest=manifest, out=out)
        if not outcome.complete:
            failed = "; ".join(outcome.errors[:5])
            raise ExportError(f"{len(outcome.errors)} episode(s) could not be written: {failed}")
        sha256 = outcome.manifest_sha256  # hashed as written: the manifest is encoded once (seconds at full size)
    return export_row_create(run=run, manifest=manifest, judge_config=judge_config, out_dir=str(out or ""), user=user,
                             sha256=sha256)
