"""`taskgen labels export --out FILE` and `taskgen labels import FILE`: every label, its history and the final
labels as JSON lines keyed by run name, task id and reviewer (review/labels_backup.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from review.labels_backup import labels_export_lines, labels_import

NAME = "labels"
HELP = "Back up every label, its history and the final labels (export), or restore them (import)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="labels_action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="write every label and its history as JSON lines")
    export.add_argument("--out", required=True, help="the file to write ('-' for standard output)")
    restore = actions.add_parser("import", help="restore a backup after the runs are imported again (idempotent)")
    restore.add_argument("file", help="a file written by `taskgen labels export`")


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


def _import(file: str, stdout, stderr) -> int:
    try:
        with Path(file).open(encoding="utf-8") as handle:
            report = labels_import(lines=handle)
    except (OSError, UnicodeDecodeError) as exc:
        stderr.write(f"cannot read {file}: {exc}")
        return 2
    stdout.write(report.summary())
    for reason in report.refused:
        stderr.write(f"  refused: {reason}")
    return 0 if report.ok else 1


def run(options: dict, stdout, stderr) -> int:
    if options["labels_action"] == "export":
        return _export(options["out"], stdout)
    return _import(options["file"], stdout, stderr)
