"""`taskgen demo-data`: load the demo data that exists on this machine (the Online-Mind2Web episodes) once."""
from __future__ import annotations

import argparse
from pathlib import Path

from django.conf import settings

from taskgen.models import Episode, Run
from taskgen.stages.import_.command import import_here

NAME = "demo-data"
HELP = "Import the demo data found beside this checkout (../shared/data/online-mind2web-abp) if not yet imported."
OM2W_RUN = "online-mind2web-abp"


def om2w_dir() -> Path:
    """Where the Online-Mind2Web episodes sit: ../shared/data beside the checkout, as on the CI machine."""
    return Path(settings.BASE_DIR).parent / "shared" / "data" / OM2W_RUN


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None, help=f"the {OM2W_RUN} folder (default: {om2w_dir()})")


def run(options: dict, stdout, stderr) -> int:
    folder = options.get("data") or om2w_dir()
    if Run.objects.filter(name=OM2W_RUN).exists():
        stdout.write(f"demo data: run {OM2W_RUN!r} is already imported")
        return 0
    if not (folder / "run").is_dir():
        stdout.write(f"demo data: {folder} not found; nothing loaded (import a run dir with `taskgen import RUN_DIR`)")
        return 0
    params = {"run_dir": str(folder / "run"), "tasks_file": str(folder / "tasks.jsonl"), "name": OM2W_RUN}
    pipeline_run, summary = import_here(params=params, stderr=stderr)  # a run on the Pipeline page, as any import
    if summary is None:
        stderr.write("demo data: import failed" + (f" (pipeline run {pipeline_run.pk})" if pipeline_run else ""))
        return 1
    skipped = len(summary["skipped"])
    stdout.write(f"demo data: loaded {summary['episodes_added']} Online-Mind2Web episodes as run {OM2W_RUN!r}"
                 + (f"; {skipped} file(s) skipped, each named by `taskgen import`" if skipped else "")
                 + _rows_words(pipeline_run.run))
    return 0


def _rows_words(run: Run | None) -> str:
    """Say so when the data has no training rows: an export of it writes none, which a newcomer would not expect."""
    if run is None or Episode.objects.filter(run=run, row_count__gt=0).exists():
        return ""
    return ("; none of its episodes has training rows (the data holds no rows folders), so its exports write none: "
            "review and validate it, and export the sandbox run")
