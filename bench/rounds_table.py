"""The README's three tables of issue 26's rounds, read from the logs `bench/rounds.sh` leaves (each benchmark's own
printed figures; nothing is measured here), so the figures go into the README as the benchmarks printed them rather
than copied by hand. A figure a log does not hold is left blank.

    .venv/bin/python bench/rounds_table.py [19 20 21 22] [--logs /tmp/taskgen-rounds]  # none named: all logged
"""
from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

Reader = Callable[[str], str]


def _log(logs: Path, round_: str, name: str) -> str:
    path = logs / f"r{round_}_{name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def _find(pattern: str, text: str, form: str) -> str:
    match = re.search(pattern, text, re.M)
    return form.format(*match.groups()) if match else ""


def _pages(text: str) -> dict:
    start = text.find("{\n")
    try:
        return json.loads(text[start:])["figures"] if start >= 0 else {}
    except (ValueError, KeyError):
        return {}


def _p95(figures: dict, *names: str) -> str:
    values = [figures.get(name, {}).get("p95_ms") for name in names]
    return " / ".join(f"{v:.1f}" if isinstance(v, int | float) else "" for v in values)


def _run_pages(figures: dict) -> str:
    values = [v["p95_ms"] for k, v in figures.items() if k.startswith("run page") and "p95_ms" in v]
    return f"{min(values):.1f}-{max(values):.1f}" if values else ""


def _kernel_copy(text: str) -> str:
    shares = re.findall(r"the kernel's own most sampled: .*?copy_folio_from_iter_atomic ([\d.]+)%", text)
    return " / ".join(f"{s}%" for s in shares)


APP = r"^\s*app: taskgen judge \S+ --workers \d+\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+%)\s+([\d.]+)"
REFERENCE = r"^\s*reference: taskgen.py judge RUN_DIR --workers \d+\s+\d+\s+([\d.]+)\s+[\d.]+\s+[\d.]+%\s+([\d.]+)"
TIMELINE = (r"timeline of app, {}:\s+first call ([\d.]+ s) after the start; \d+ calls in [\d.]+ s \(([\d.]+%) of their "
            r"floor.*the end ([\d.]+ s) after")

JUDGE: list[tuple[str, Reader]] = [
    ("`taskgen judge RUN --workers 16`, a whole process: of the ideal; its CPU per judgment",
     lambda t: _find(APP, t, "{}; {} ms")),
    ("the reference's `taskgen.py judge RUN_DIR --workers 16`: s; CPU per judgment",
     lambda t: _find(REFERENCE, t, "{} s; {} ms")),
    ("the app beside it: throughput; CPU per judgment",
     lambda t: _find(r"the app beside the reference: ([\d.]+x) its throughput, ([\d.]+x) less", t, "{}; {} less")),
    ("2 x `taskgen resume RUN --workers 16` against one process (from the printed rates)",
     lambda t: _find(r"^\s*2 processes\s+([\d.]+x) the rate of one", t, "{}")),
    ("one process: its start / its calls against their floor / its end",
     lambda t: _find(TIMELINE.format("1 process"), t, "{} / {} / {}")),
    ("two processes: their start / their calls against their floor / their end",
     lambda t: _find(TIMELINE.format("2 processes"), t, "{} / {} / {}")),
    ("the machine busy while two processes judge (of 2 cores)",
     lambda t: _find(r"^\s+two processes: .*the machine busy (\d+%)", t, "{}")),
]
PAGES: list[tuple[str, Callable[[dict], str]]] = [
    ("queue page / episode page / label post", lambda f: _p95(f, "queue page", "episode page", "label post")),
    ("run page: 45 views, p95 range", _run_pages),
    ("validate vs verifiers / final labels", lambda f: _p95(f, "validate: vs verifiers", "validate: vs final labels")),
    ("a certify call, p50 / p95", lambda f: " / ".join(f"{f.get('certify call', {}).get(k, '')}"
                                                      for k in ("p50_ms", "p95_ms"))),
    ("the episodes left to judge (p50; no target issued)",
     lambda f: f"{f.get('judge: episodes left', {}).get('p50_ms', '')}"),
    ("a gunicorn worker's peak memory (MB)", lambda f: f"{f.get('web worker memory', {}).get('peak_mb', '')}"),
]
FIRST = (r"first import: `taskgen import RUN_DIR` [\d.]+s, (\d+) episodes/s .*?CPU ([\d.]+)s = .*?; ([\d.]+)s of it in "
         r"the kernel")
REST: list[tuple[str, str, Reader]] = [
    ("`taskgen import RUN_DIR` (2,000 episodes x 10 screenshots), a whole process: rate (its CPU; the kernel's share)",
     "import", lambda t: _find(FIRST, t, "{}/s ({} s; {} s)")),
    ("the same first import, its blob store on a journaled ext4 made on this disk", "import",
     lambda t: _find(r"first import, its blob store on a journaled ext4 made on this disk: [\d.]+s, (\d+) episodes/s",
                     t, "{}/s")),
    ("the machine's floor (the same screenshots read, hashed, stored by a bare loop in 2 processes)", "import",
     lambda t: _find(r"the machine's floor: .*?\): ([\d.]+)s = (\d+) episodes/s", t, "{} s = {}/s")),
    ("perf of one more first import: the kernel's copy into the page cache (`copy_folio_from_iter_atomic`), this "
     "disk / journaled", "import", _kernel_copy),
    ("`taskgen rows --include-verifier-failed` at 27,644 steps against the reference's `rows`; peak memory", "export",
     lambda t: _find(r"reference `rows` \(copytree\)\s+median\s+([\d.]+) s.*\n.*app, --workers 1 \(default\).*?peak"
                     r"\s+(\d+) MB.*?([\d.]+x) the reference's time", t, "{2} its {0} s; {1} MB")),
    ("the seed's scale end to end", "seed", lambda t: _find(r"the whole pipeline: ([\d.]+ min)", t, "{}")),
]


def _machine(logs: Path, round_: str) -> str:
    rounds = logs / "rounds.log"
    text = rounds.read_text(errors="replace") if rounds.exists() else ""
    return _find(rf"^round {round_} this machine: pure Python ([\d-]+ ms) CPU.*?start ([\d.]+ s)", text, "{}; {}")


def _table(title: str, rows: list[tuple[str, list[str]]], rounds: list[str]) -> str:
    lines = [f"| {title} | {' | '.join(f'round {r}' for r in rounds)} |", f"|---|{'---|' * len(rounds)}"]
    lines += [f"| {label} | {' | '.join(cells)} |" for label, cells in rows]
    return "\n".join(lines)


def rounds_tables(logs: Path, rounds: list[str]) -> str:
    """The three tables (the judge, the pages at 1M episodes, import, export and the seed) for these rounds."""
    judge = {r: _log(logs, r, "judge") for r in rounds}
    pages = {r: _pages(_log(logs, r, "pages")) for r in rounds}
    machine = [("this machine (`bench/machine.py`: pure Python, quickest-slowest of ten; a Django + SDK start)",
                [_machine(logs, r) for r in rounds])]
    return "\n\n".join([
        _table("the judge (560 episodes, fake Gemini 300 ms, 16 in flight)", machine + [
            (label, [read(judge[r]) for r in rounds]) for label, read in JUDGE], rounds),
        _table("pages at 1,000,000 episodes (p95 wall, ms)", [
            (label, [read(pages[r]) for r in rounds]) for label, read in PAGES], rounds),
        _table("import, export and the seed's scale", [
            (label, [read(_log(logs, r, name)) for r in rounds]) for label, name, read in REST], rounds),
    ])


def rounds_logged(logs: Path) -> list[str]:
    """The rounds whose logs are in `logs`, in order."""
    found = {match.group(1) for path in logs.glob("r*_*.log") if (match := re.fullmatch(r"r(\d+)_\w+\.log", path.name))}
    return sorted(found, key=int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", nargs="*", help="the rounds to show (default: every round the logs hold)")
    parser.add_argument("--logs", type=Path, default=Path(os.environ.get("LOGS", "/tmp/taskgen-rounds")))
    args = parser.parse_args()
    rounds = args.rounds or rounds_logged(args.logs)
    print(rounds_tables(args.logs, rounds) if rounds else f"no rounds' logs in {args.logs} (bench/rounds.sh ROUND)")


if __name__ == "__main__":
    main()
