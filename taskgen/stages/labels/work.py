"""Restoring a labels backup as the engine runs it (`labels` stage): the file is stored first
(DATA_ROOT/.labels-restores/<sha256>.jsonl, so every worker and every resume reads the same bytes), then

- `check-N`: a chunk of CHECK_LINES lines checked (taskgen/stages/labels/check.py), nothing written;
- `verify`: once every chunk is checked, what only the whole file shows; with all_or_nothing and any line refused,
  nothing is written;
- `write-N`: the lines of the episodes whose id is N modulo the number of write units, written
  (taskgen/stages/labels/write.py); they wait for `verify`.

Every unit is safe to do again: a chunk's lines are replaced, a line's outcome is kept with its write.
"""
from __future__ import annotations

import hashlib
import os
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from taskgen.engine.contract import RetryLater, StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.labels.backup import KINDS
from taskgen.models import LabelRestoreLine, PipelineRun, WorkUnit
from taskgen.stages.labels.check import lines_check, lines_verify
from taskgen.stages.labels.write import bucket_write

CHECK_LINES = 5000  # lines a check unit reads
WRITE_LINES = 2000  # lines per write unit, about (episodes are spread over the write units by id)
WRITE_UNITS_MAX = 500
REFUSALS_ON_THE_RUN = 100  # refused lines copied into the run's errors (every one: `labels_restore_refusals`)
Outcome = LabelRestoreLine.Outcome
Status = WorkUnit.Status


@dataclass(frozen=True)
class LabelsRestoreParams(StageParams):
    """The stored file (by its sha256), its name as given, its line count, and whether one refused line stops
    every write."""

    file_sha256: str
    name: str = ""
    lines: int = 0
    all_or_nothing: bool = False

    @property
    def path(self) -> Path:
        return labels_restore_folder() / f"{self.file_sha256}.jsonl"

    @property
    def write_units(self) -> int:
        return max(1, min(WRITE_UNITS_MAX, -(-self.lines // WRITE_LINES)))


def labels_restore_folder() -> Path:
    return Path(settings.DATA_ROOT) / ".labels-restores"


def labels_restore_file_store(*, source: BinaryIO) -> tuple[str, int]:
    """Copy a backup into the restore folder, named by its sha256 (the same file stored twice is one file); its
    sha256 and line count."""
    folder = labels_restore_folder()
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".new-{uuid.uuid4().hex}"
    digest, lines, last = hashlib.sha256(), 0, b"\n"
    with partial.open("wb") as out:
        while chunk := source.read(1 << 20):
            out.write(chunk)
            digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    sha = digest.hexdigest()
    os.replace(partial, folder / f"{sha}.jsonl")
    return sha, lines + (last != b"\n")


def labels_restore_params_check(raw: dict) -> LabelsRestoreParams:
    sha = str(raw.get("file_sha256") or "")
    if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
        raise StageParamsError("file_sha256 must name a stored backup (64 hex digits)")
    params = LabelsRestoreParams(file_sha256=sha, name=str(raw.get("name") or "")[:200],
                                 lines=int(raw.get("lines") or 0), all_or_nothing=bool(raw.get("all_or_nothing")))
    if not params.path.is_file():
        raise StageParamsError(f"there is no stored backup {sha}")
    return params


def _units(params: LabelsRestoreParams) -> list[str]:
    checks = max(1, -(-params.lines // CHECK_LINES))
    return [*(f"check-{n}" for n in range(checks)), "verify", *(f"write-{n}" for n in range(params.write_units))]


def _wait_for(pipeline_run: PipelineRun, keys, what: str) -> None:
    """RetryLater until the units are done; an error when one failed for good (the run then ends failed, and a
    resume runs it again)."""
    statuses = Counter(WorkUnit.objects.filter(pipeline_run=pipeline_run, key__in=keys).values_list("status",
                                                                                                    flat=True))
    if statuses[Status.FAILED] or statuses[Status.CANCELLED]:
        raise RuntimeError(f"{what} did not finish: nothing is written until it does (resume the run)")
    if sum(statuses.values()) != statuses[Status.DONE]:
        raise RetryLater(3, f"waiting for {what}")


def _verified(pipeline_run: PipelineRun) -> dict:
    _wait_for(pipeline_run, ["verify"], "the check of the whole file")
    return WorkUnit.objects.get(pipeline_run=pipeline_run, key="verify").result or {}


def _do(pipeline_run: PipelineRun, params: LabelsRestoreParams, key: str) -> dict:
    kind, _, number = key.partition("-")
    if kind == "check":
        return lines_check(pipeline_run_id=pipeline_run.pk, path=params.path, first=int(number) * CHECK_LINES + 1,
                           count=CHECK_LINES, buckets=params.write_units)
    if kind == "verify":
        checks = WorkUnit.objects.filter(pipeline_run=pipeline_run, key__startswith="check-").values("key")
        _wait_for(pipeline_run, checks, "the check of every line")
        refused = lines_verify(pipeline_run_id=pipeline_run.pk)
        return {"refused": refused, "write": not (params.all_or_nothing and refused)}
    if not _verified(pipeline_run).get("write"):
        return {"lines": 0, "skipped": "all or nothing: a line was refused, so nothing is written"}
    return bucket_write(pipeline_run_id=pipeline_run.pk, bucket=int(number))


def labels_restore_counts(pipeline_run: PipelineRun) -> dict:
    """Lines added, already there and refused, per kind, from the run's lines."""
    counts = {outcome: dict.fromkeys(KINDS, 0) for outcome in (Outcome.ADDED, Outcome.UNCHANGED)}
    rows = LabelRestoreLine.objects.filter(pipeline_run=pipeline_run, outcome__in=list(counts)).values_list(
        "outcome", "kind")
    for (outcome, kind), n in Counter(rows).items():
        counts[outcome][kind] = n
    refused = LabelRestoreLine.objects.filter(pipeline_run=pipeline_run, outcome=Outcome.REFUSED).count()
    return {"added": counts[Outcome.ADDED], "already_there": counts[Outcome.UNCHANGED], "refused": refused}


def labels_restore_refusals(pipeline_run: PipelineRun, limit: int | None = None) -> list[str]:
    """Every refused line of the restore, in file order: `line N (kind): why`."""
    refused = LabelRestoreLine.objects.filter(pipeline_run=pipeline_run, outcome=Outcome.REFUSED).order_by("line")
    return [f"line {line}{f' ({kind})' if kind else ''}: {why}"
            for line, kind, why in refused.values_list("line", "kind", "refusal")[:limit]]


def _finish(pipeline_run: PipelineRun, params: LabelsRestoreParams, failed: int) -> dict:
    verify = WorkUnit.objects.filter(pipeline_run=pipeline_run, key="verify").values_list("result", flat=True).first()
    written = bool((verify or {}).get("write")) and not failed
    pipeline_run.errors = [*pipeline_run.errors, *labels_restore_refusals(pipeline_run, REFUSALS_ON_THE_RUN)]
    result = {"file": params.name, "lines": params.lines, "all_or_nothing": params.all_or_nothing,
              **labels_restore_counts(pipeline_run),
              "written": "every line not refused" if written else "nothing" if verify else "not finished"}
    if not failed:  # a resume needs the lines not written yet; refused ones stay listed
        LabelRestoreLine.objects.filter(pipeline_run=pipeline_run).exclude(outcome=Outcome.REFUSED).delete()
    return result


LABELS_RESTORE_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.LABELS, check=labels_restore_params_check, read=LabelsRestoreParams.from_json,
    units=_units, do=_do, finish=_finish, queue="default", batch=1, unit_seconds=1800,
))
