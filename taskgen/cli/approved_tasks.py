"""`taskgen approved-tasks --sites a,b --out FILE [--all]`: the reviewed tasks of some sites as a tasks.jsonl, for
`taskgen attempt --tasks FILE` (the Tasks page's "Attempt the approved tasks" does both in one go)."""
from __future__ import annotations

import argparse
from pathlib import Path

from taskgen.stages.paths import PathError, path_under_data_root
from taskgen.stages.propose.tasks_file import reviewed_tasks, tasks_jsonl_append

NAME = "approved-tasks"
HELP = "Write the approved tasks of some sites (or all not dropped, with --all) as a tasks.jsonl for an attempt."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sites", required=True, help="comma-separated site slugs")
    parser.add_argument("--out", type=Path, required=True, help="the tasks.jsonl to write (under the data root)")
    parser.add_argument("--all", action="store_true", help="also the tasks nobody has approved yet (not dropped)")


def run(options: dict, stdout, stderr) -> int:
    try:
        out = path_under_data_root(raw=options["out"].expanduser().absolute())
    except PathError as exc:
        stderr.write(f"approved-tasks: {exc}")
        return 2
    if out.exists():
        stderr.write(f"approved-tasks: {out} exists: choose a new file (an attempt's tasks are never mixed)")
        return 2
    sites = [s.strip() for s in options["sites"].split(",") if s.strip()]
    tasks = reviewed_tasks(sites=sites, include_all=options["all"])
    if not tasks:
        stderr.write(f"approved-tasks: no {'tasks not dropped' if options['all'] else 'approved tasks'} for "
                     f"{', '.join(sites)}: review them on the Tasks page first")
        return 1
    stdout.write(f"wrote {tasks_jsonl_append(path=out, tasks=tasks)} tasks to {out}")
    return 0
