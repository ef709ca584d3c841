"""`taskgen import RUN_DIR [--tasks FILE] [--name NAME]`: import a reference run dir, with a summary at the end."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from taskgen.stages.import_.service import ImportFailed, ImportSummary, import_run_dir

NAME = "import"
HELP = "Import a run dir (tasks, episodes, screenshots, rows, verifier results, an existing <RUN_DIR>_judge folder)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    parser.add_argument("--tasks", type=Path, default=None,
                        help="tasks file (default: RUN_DIR/tasks.jsonl, else a tasks.jsonl beside RUN_DIR)")
    parser.add_argument("--name", default=None, help="the run's name (default: the folder's name)")


def _progress_bar(stream) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A tqdm bar on a terminal only; logs and pipes get the summary alone."""
    if not stream.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=0, unit="episode", file=stream, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update, bar.close


def summary_lines(summary: ImportSummary) -> list[str]:
    s = summary
    lines = [
        f"run {s.run.name!r} (id {s.run.pk})",
        f"episodes: {s.episodes_added} added, {s.episodes_updated} updated, {s.episodes_unchanged} unchanged",
        f"screenshots: {s.screenshots} stored",
        f"tasks: {s.tasks_added} added, {s.tasks_updated} updated, {s.tasks_without_episode} without an episode folder",
        f"verifier results: {s.verifier_results} new or changed, {s.verifier_results_unchanged} unchanged",
        f"judgments: {s.judgments} new or changed, {s.judgments_unchanged} unchanged",
        f"skipped: {len(s.skipped)}",
    ]
    return lines + [f"  {skip.path}: {skip.reason}" for skip in s.skipped]


def run(options: dict, stdout, stderr) -> int:
    progress, close = _progress_bar(sys.stderr)
    try:
        summary = import_run_dir(run_dir=options["run_dir"], tasks_file=options["tasks"], name=options["name"],
                                 progress=progress)
    except ImportFailed as exc:
        stderr.write(f"import failed: {exc}")
        return 1
    finally:
        close()
    stdout.write("\n".join(summary_lines(summary)))
    if summary.episodes_imported == 0:
        stderr.write("nothing could be imported")
        return 1
    return 0
