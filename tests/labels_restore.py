"""Restoring labels in tests as the command line does: the file stored, the `labels` stage worked in this process."""
from __future__ import annotations

import io
from dataclasses import dataclass

from taskgen.engine.wait import run_wait
from taskgen.models import PipelineRun
from taskgen.stages.begin import labels_restore_begin
from taskgen.stages.labels.work import labels_restore_refusals

RESTORED = "written: every line not refused"


@dataclass
class Restored:
    pipeline_run: PipelineRun
    added: dict
    unchanged: dict
    refused: list[str]

    @property
    def ok(self) -> bool:
        return not self.refused


def work_here(pipeline_run: PipelineRun) -> PipelineRun:
    waited = run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, poll_seconds=0.05,
                      stall_seconds=60)
    assert waited.pipeline_run.is_finished, "the restore did not finish"
    return waited.pipeline_run


def backup_bytes(lines: list[str]) -> bytes:
    """Lines as a backup file: one a line."""
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).encode()


def restore(lines: list[str] | bytes, *, all_or_nothing: bool = False) -> Restored:
    data = lines if isinstance(lines, bytes) else backup_bytes(lines)
    pipeline_run = work_here(labels_restore_begin(source=io.BytesIO(data), name="labels.jsonl",
                                                  all_or_nothing=all_or_nothing, user=None))
    result = pipeline_run.result
    return Restored(pipeline_run, result["added"], result["already_there"], labels_restore_refusals(pipeline_run))
