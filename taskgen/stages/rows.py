"""The rows stage (the reference's `rows`): exports of approved episodes as a trainer's rows folder or a .tar.gz.

One import path for callers; the work is split by concern:
  rows_select   which episodes, in which order, the report and the manifest (database reads only)
  rows_output   writing the folder and streaming the .tar.gz
  exports       Export rows, at once (command line, download) or in the background as a PipelineRun
"""
from taskgen.stages.exports import export_create, export_out_dir_check, export_run, export_start
from taskgen.stages.rows_output import export_missing_files, export_stream_targz, export_write_dir
from taskgen.stages.rows_select import (
    ExportError,
    Selection,
    export_budget_check,
    export_manifest,
    export_report,
    export_select,
    manifest_bytes,
    manifest_sha256,
    report_bytes,
)

__all__ = [
    "ExportError", "Selection", "export_budget_check", "export_create", "export_manifest", "export_missing_files",
    "export_out_dir_check", "export_report", "export_run", "export_select", "export_start", "export_stream_targz",
    "export_write_dir", "manifest_bytes", "manifest_sha256", "report_bytes",
]
