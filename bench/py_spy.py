"""A whole process's profile from py-spy (sampling every thread, only the one holding the GIL: Python's CPU, not
its waits), for the benchmarks that measure a command as a user runs it (bench/judge.py --py-spy,
bench/import_run.py --py-spy).

py-spy is a benchmark tool, not a dependency of the app: `.venv/bin/pip install py-spy`.
"""
from __future__ import annotations

import re
import shutil
import sys
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def py_spy_prefix(out: Path, rate: int = 250) -> list[str]:
    """The words that put a command under py-spy, writing its stacks (collapsed, one line a stack) to `out`."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--py-spy needs py-spy: .venv/bin/pip install py-spy")
    return [spy, "record", "--gil", "--format", "raw", "--rate", str(rate), "--output", str(out), "--"]


def _frame(raw: str, root: str) -> str:
    match = FRAME.match(raw.strip())
    if match is None:
        return raw.strip()
    where = match["file"].replace(root, "").replace(sys.prefix + "/", "")
    where = re.sub(r"^.*site-packages/", "", where)
    return f"{match['function']} ({where})"


def py_spy_top(raw: Path, *, root: str, count: int = 25) -> list[str]:
    """The functions most often on the stack (inclusive) and at its top (self), as shares of all samples."""
    inclusive, own, total = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if not stack or not samples.isdigit():
            continue
        frames = [_frame(frame, root) for frame in stack.split(";")[1:]]  # the first is the process
        n = int(samples)
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        if frames:
            own[frames[-1]] += n
    lines = [f"{total} samples; on the stack (inclusive):"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(count)]
    lines.append("at the top of the stack (self):")
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(count // 2)]
    return lines
