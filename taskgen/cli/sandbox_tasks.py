"""`taskgen sandbox-tasks [--out FILE]`: write the sandbox sites' human tasks (with verifiers) as tasks.jsonl."""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from sandbox.catalog import TASKS_FILE, sandbox_tasks, sandbox_tasks_write

NAME = "sandbox-tasks"
HELP = "Write the sandbox human tasks, each with a verifier and a known solution, as a tasks.jsonl."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=TASKS_FILE, help=f"default: {TASKS_FILE}")


def run(options: dict, stdout, stderr) -> int:
    count = sandbox_tasks_write(path=options["out"])
    kinds = Counter(f"{t['site']} {t['task_kind']}" for t in sandbox_tasks())
    stdout.write(f"{count} tasks -> {options['out']} ({', '.join(f'{k}: {v}' for k, v in sorted(kinds.items()))})")
    return 0
