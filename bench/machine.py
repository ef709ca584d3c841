"""How quick this machine is at what the benchmarks' figures rest on, so rounds taken on different machines can be
set side by side (each session runs on a new machine of the same kind, and their speeds differ):

- pure Python: the CPU time of a fixed workload of the interpreter's own work (calls, dicts, strings, small ints),
  what a judgment's and a page's Python costs follow; the quickest and the slowest of ten, a third of a second
  apart, since on some machines the same work runs at a speed that changes from one second to the next (seen on
  2026-12-06: 66 ms, then 118-149 ms for seconds on end, then 66 again, the machine otherwise idle and no
  steal time: the host's doing);
- a process's start: a new Python that sets Django up and imports the google-genai SDK, as `taskgen judge` does
  before its first call;
- fresh memory: 256 MB zeroed in one allocation (its page faults; on a machine that reports free pages to its host,
  the host's too), GB/s;
- files into the page cache: 2,000 files of 100 kB written and closed (no fsync), as an import's blob store makes
  them, MB/s.

The others are each the best of three (the least disturbed). Nothing here is a target; a round's header prints the line.

    .venv/bin/python bench/machine.py [--json | --line]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRIES = 3
START = ("import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'taskgen.settings'); django.setup(); "
         "import google.genai")


def _best(measure, tries: int = TRIES) -> float:
    return min(measure() for _ in range(tries))


def _interpreter_work() -> int:
    """A fixed mix of the interpreter's own work: calls, dict and list building, string formatting, small ints."""
    total = 0
    for i in range(200_000):
        row = {"id": i, "name": f"episode-{i}", "steps": [i % 7, i % 11]}
        total += len(row["name"]) + sum(row["steps"])
    return total


def python_ms(samples: int = 10, apart: float = 0.3) -> tuple[float, float]:
    """CPU milliseconds of the fixed pure-Python workload: the quickest and the slowest of `samples`."""
    times = []
    for n in range(samples):
        if n:
            time.sleep(apart)
        started = time.process_time()
        _interpreter_work()
        times.append((time.process_time() - started) * 1000)
    return min(times), max(times)


def start_s(tries: int = TRIES) -> float:
    """Wall seconds of a new Python that sets Django up and imports google-genai (`taskgen judge`'s start)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def once() -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", START], cwd=ROOT, env=env, check=True)
        return time.perf_counter() - started
    return _best(once, tries)


def fresh_memory_gb_s(megabytes: int = 256) -> float:
    """GB/s of zeroing a fresh allocation of `megabytes` (each page faulted in as it is zeroed)."""
    def once() -> float:
        started = time.perf_counter()
        block = bytearray(megabytes << 20)
        block[-1] = 1  # kept alive to here
        seconds = time.perf_counter() - started
        del block
        return seconds
    return megabytes / 1024 / _best(once)


def page_cache_mb_s(files: int = 2000, kilobytes: int = 100, where: Path = ROOT / "var" / "bench") -> float:
    """MB/s of writing `files` files of `kilobytes` each into a new folder (closed, not synced), as a blob store."""
    payload = os.urandom(kilobytes << 10)
    where.mkdir(parents=True, exist_ok=True)

    def once() -> float:
        folder = Path(tempfile.mkdtemp(dir=where, prefix="machine-"))
        try:
            started = time.perf_counter()
            for n in range(files):
                (folder / f"{n:05d}").write_bytes(payload)
            return time.perf_counter() - started
        finally:
            shutil.rmtree(folder)
    return files * kilobytes / 1024 / _best(once)


def machine_figures() -> dict[str, float]:
    quickest, slowest = python_ms()
    return {"python_ms": round(quickest, 1), "python_slowest_ms": round(slowest, 1), "start_s": round(start_s(), 3),
            "fresh_memory_gb_s": round(fresh_memory_gb_s(), 2), "page_cache_mb_s": round(page_cache_mb_s())}


def machine_line(figures: dict[str, float]) -> str:
    return (f"pure Python {figures['python_ms']:.0f}-{figures['python_slowest_ms']:.0f} ms CPU (the quickest and "
            f"slowest of ten); Django + google-genai start {figures['start_s']:.2f} s; "
            f"fresh memory {figures['fresh_memory_gb_s']:.1f} GB/s; files into the page cache "
            f"{figures['page_cache_mb_s']:,.0f} MB/s (those three the best of {TRIES})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--line", action="store_true", help="print the one line a round's header takes")
    args = parser.parse_args()
    figures = machine_figures()
    print(json.dumps(figures) if args.json else machine_line(figures) if args.line else
          f"this machine: {machine_line(figures)}")


if __name__ == "__main__":
    main()
