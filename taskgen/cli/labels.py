"""`taskgen labels export --out FILE` and `taskgen labels import FILE [--all-or-nothing]`: every label, its history
and the final labels as JSON lines keyed by run name, task id and reviewer (taskgen/labels/backup.py). An import is a
run of the `labels` stage on the engine (taskgen/stages/labels/), worked here: every line is checked first, then
the good ones are written and every refused line is printed with its number (or, with --all-or-nothing, nothing is
written when any line is refused)."""
from __future__ import annotations

import argparse
from pathlib import Path

from taskgen.engine.wait import run_wait, wait_report
from taskgen.labels.backup import labels_export_lines
from taskgen.stages.begin import labels_restore_begin
from taskgen.stages.labels.work import LABELS_RESTORE_WORK, labels_restore_refusals

NAME = "labels"
HELP = "Back up every label, its history and the final labels (export), or restore them (import)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="labels_action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write every label and its history as JSON lines")
    export.add_argument("--out", required=True, help="the file to write ('-' for standard output)")
    restore = actions.add_parser("import", help="restore a backup after the runs are imported again (idempotent)")
    restore.add_argument("file", help="a file written by `taskgen labels export`")
    restore.add_argument("--all-or-nothing", action="store_true",
                         help="write nothing when any line is refused (default: write every good line)")


def _export(out: str, stdout) -> int:
    if out == "-":
        for line in labels_export_lines():
            stdout.write(line, ending="")
        return 0
    count = 0
    with Path(out).open("w", encoding="utf-8") as handle:
        for line in labels_export_lines():
            handle.write(line)
            count += 1
    stdout.write(f"wrote {count - 1} rows to {out}")
    return 0


def summary_line(result: dict) -> str:
    """The restore's counts as one line: `label: 4 added, 0 already there, ...; refused: 2; written: ...`."""
    counts = ", ".join(f"{kind}: {n} added, {result['already_there'][kind]} already there"
                       for kind, n in result["added"].items())
    return f"{counts}; refused: {result['refused']}; written: {result['written']}"


def _import(file: str, all_or_nothing: bool, stdout, stderr) -> int:
    try:
        with Path(file).open("rb") as handle:
            pipeline_run = labels_restore_begin(source=handle, name=Path(file).name, all_or_nothing=all_or_nothing,
                                                user=None)
    except OSError as exc:
        stderr.write(f"cannot read {file}: {exc}")
        return 2
    waited = run_wait(pipeline_run=pipeline_run, stream=stderr, work_here=1,
                      stall_seconds=LABELS_RESTORE_WORK.unit_seconds)
    if wait_report(waited=waited, stream=stderr):
        return 1
    stdout.write(summary_line(waited.pipeline_run.result))
    refusals = labels_restore_refusals(waited.pipeline_run)
    for reason in refusals:
        stderr.write(f"  refused: {reason}")
    return 1 if refusals else 0


def run(options: dict, stdout, stderr) -> int:
    if options["labels_action"] == "export":
        return _export(options["out"], stdout)
    return _import(options["file"], options["all_or_nothing"], stdout, stderr)
