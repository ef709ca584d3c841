"""The README's three tables of issue 26's rounds, read from the logs `bench/rounds.sh` leaves (each benchmark's own
printed figures; nothing is measured here), so the figures go into the README as the benchmarks printed them rather
than copied by hand. A figure a log does not hold is left blank. Under the tables, issue 26's targets: which each
round met and missed (judged from the figures the tables show), and whether two rounds in a row met every one (the
issue's "Done when"); a target whose figure is blank is neither met nor missed but "not measured".

    .venv/bin/python bench/rounds_table.py [19 20 21 22] [--logs /tmp/taskgen-rounds]  # none named: all logged
"""
from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
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


@dataclass(frozen=True)
class Target:
    """One of issue 26's targets: the table row whose figure it judges, which of the figure's numbers, the bound, and
    whether the number must be at least (True) or at most (False) the bound."""

    name: str
    row: str  # how the row's label starts
    number: int | None  # which number of the figure (0: the first, -1: the last; None: the largest)
    bound: float
    at_least: bool
    shown: str  # the bound as the tables' target column shows it

    def met(self, figure: str) -> bool | None:
        """Whether the figure meets the target; None when the figure is blank (not measured)."""
        numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", figure.replace(",", ""))]
        if not numbers:
            return None
        value = max(numbers) if self.number is None else numbers[self.number]
        return value >= self.bound if self.at_least else value <= self.bound

    def words(self) -> str:
        return f"{self.name} {'>=' if self.at_least else '<='} {self.bound:g}"


TARGETS = [  # (the bound as the tables' target column shows it)
    Target("one process, of the ideal (%)", "`taskgen judge RUN", 0, 90, True, "90%"),
    Target("its CPU per judgment (ms)", "`taskgen judge RUN", 1, 12, False, "12 ms"),
    Target("its CPU against the reference's (x less)", "the app beside it", 1, 5, True, "5x less"),
    Target("two processes against one (x)", "2 x `taskgen resume", 0, 1.8, True, "1.8x"),
    Target("queue page p95 (ms)", "queue page /", 0, 100, False, "100"),
    Target("episode page p95 (ms)", "queue page /", 1, 80, False, "80"),
    Target("label post p95 (ms)", "queue page /", 2, 50, False, "50"),
    Target("run page, its slowest view's p95 (ms)", "run page:", None, 150, False, "150"),
    Target("validate vs verifiers (ms)", "validate vs", 0, 1000, False, "1,000"),
    Target("validate vs final labels (ms)", "validate vs", 1, 1000, False, "1,000"),
    Target("a certify call p95 (ms)", "a certify call", 1, 300, False, "300"),
    Target("a web worker's memory (MB)", "a gunicorn worker", 0, 300, False, "300"),
    Target("import (episodes/s)", "`taskgen import RUN_DIR`", 0, 1000, True, "1,000/s"),
    Target("export against the reference's time (x)", "`taskgen rows", 0, 1.0, False, "no slower"),
    Target("export's peak memory (MB)", "`taskgen rows", -1, 120, False, "120 MB"),
    Target("the seed's scale (min)", "the seed's scale", 0, 15, False, "15 min"),
]


def _machine(logs: Path, round_: str) -> str:
    rounds = logs / "rounds.log"
    text = rounds.read_text(errors="replace") if rounds.exists() else ""
    return _find(rf"^round {round_} this machine: pure Python ([\d-]+ ms) CPU.*?start ([\d.]+ s)", text, "{}; {}")


def _target_words(label: str) -> str:
    """A row's targets as its target column shows them: apart as the row's figures are (" / " or "; ")."""
    shown = list(dict.fromkeys(t.shown for t in TARGETS if label.startswith(t.row)))
    return (" / " if " / " in label else "; ").join(shown)


def _table(title: str, rows: list[tuple[str, list[str]]], rounds: list[str]) -> str:
    lines = [f"| {title} | {' | '.join(f'round {r}' for r in rounds)} | target |", f"|---|{'---|' * len(rounds)}---|"]
    lines += [f"| {label} | {' | '.join(cells)} |" + (f" {words} |" if (words := _target_words(label)) else " |")
              for label, cells in rows]
    return "\n".join(lines)


def _rows(logs: Path, rounds: list[str]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """Each table's title and rows: a row's label and its figure in each round."""
    judge = {r: _log(logs, r, "judge") for r in rounds}
    pages = {r: _pages(_log(logs, r, "pages")) for r in rounds}
    machine = [("this machine (`bench/machine.py`: pure Python, quickest-slowest of ten; a Django + SDK start)",
                [_machine(logs, r) for r in rounds])]
    return [
        ("the judge (560 episodes, fake Gemini 300 ms, 16 in flight; ideal 53.3/s)", machine + [
            (label, [read(judge[r]) for r in rounds]) for label, read in JUDGE]),
        ("pages at 1,000,000 episodes (p95 wall, ms)", [
            (label, [read(pages[r]) for r in rounds]) for label, read in PAGES]),
        ("import, export and the seed's scale", [
            (label, [read(_log(logs, r, name)) for r in rounds]) for label, name, read in REST]),
    ]


def targets_met(logs: Path, rounds: list[str]) -> dict[str, dict[str, bool | None]]:
    """Each round's verdict on each target (TARGETS), from the figure its table shows: met, missed, None when blank."""
    return _verdicts(_rows(logs, rounds), rounds)


def _verdicts(tables: list[tuple[str, list[tuple[str, list[str]]]]], rounds: list[str]
              ) -> dict[str, dict[str, bool | None]]:
    figures = {label: cells for _, rows in tables for label, cells in rows}
    verdicts: dict[str, dict[str, bool | None]] = {r: {} for r in rounds}
    for target in TARGETS:
        cells = next(cells for label, cells in figures.items() if label.startswith(target.row))
        for round_, figure in zip(rounds, cells, strict=True):
            verdicts[round_][target.name] = target.met(figure)
    return verdicts


def _verdict_lines(verdicts: dict[str, dict[str, bool | None]]) -> list[str]:
    lines = []
    for round_, met in verdicts.items():
        if all(value is None for value in met.values()):
            lines.append(f"- round {round_}: no figures (its logs are not here)")
            continue
        words = [f"met {sum(v is True for v in met.values())} of {len(met)}"]
        for said, value in (("missed", False), ("not measured", None)):
            names = [t.words() for t in TARGETS if met[t.name] is value]
            if names:
                words.append(f"{said}: {', '.join(names)}")
        lines.append(f"- round {round_}: {'; '.join(words)}")
    rounds = list(verdicts)
    every = [r for r in rounds if all(v is True for v in verdicts[r].values())]
    pairs = [f"{a} and {b}" for a, b in pairwise(rounds) if a in every and b in every and int(b) == int(a) + 1]
    lines.append(f"- every target in two rounds in a row: {'rounds ' + '; '.join(pairs) if pairs else 'no'}"
                 f" (every target in one round: {', '.join(every) or 'none'})")
    return lines


def rounds_tables(logs: Path, rounds: list[str]) -> str:
    """The three tables (the judge, the pages at 1M episodes, import, export and the seed) for these rounds, each with
    its targets, and under them which targets each round met."""
    read = _rows(logs, rounds)  # the logs read once: the tables and the verdicts show the same figures
    tables = [_table(title, rows, rounds) for title, rows in read]
    return "\n\n".join([*tables, "Issue 26's targets:\n" + "\n".join(_verdict_lines(_verdicts(read, rounds)))])


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
