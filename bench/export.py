"""The rows export side by side with the reference's `rows` on the same run: real-size step screenshots (the sandbox
harness's 1280x800 PNGs), every one distinct, interleaved runs; prints both times, the ratio and each one's peak
memory, and checks that both wrote the same _report.json byte for byte.

    .venv/bin/python bench/export.py [--episodes 3000] [--budget 27644] [--repeats 3] [--workers 1,2]

The corpus is made once and cached under var/bench/export/: episodes copied round robin from the harness's run dir
(bench/real_screens.py runs the harness the first time), each step image given its own PNG text chunk, sites spread
over ten copies of each sandbox site, a judge dir whose predicted_label approves 9 episodes in 10. The app imports it
once into its own embedded database there (`taskgen import`); then each repeat runs `taskgen rows
--include-verifier-failed` (the app, with the reference's selection: its default leaves out the episodes the
verifier failed) and
the reference's own `rows` (../shared/reference/taskgen.py with its shim) as separate processes, one after the
other (the order flipped every other repeat), each writing a new folder, each starting with the disk caught up
(`sync`: writing is most of the time, and the other side's gigabyte still being written back slowed whichever ran
second). Peak memory is each process's maximum resident set (the app's includes Django).
Targets: the app no slower than the reference, under 120 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.real_screens import distinct_png, harness_run_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "bench" / "export"
REFERENCE = Path(os.environ.get("TASKGEN_REFERENCE", ROOT.parent / "shared" / "reference" / "taskgen.py"))
SHIM = REFERENCE.parent / "shim"  # stand-ins for the modules the reference imports from its own project
SITE_COPIES = 10  # shop -> shop0..shop9: about 50 sites, as a real run has
MEMORY_TARGET_MB = 120


def _sources(harness: Path) -> list[tuple[Path, dict]]:
    tasks = {t["task_id"]: t for t in map(json.loads, (harness / "tasks.jsonl").read_text().splitlines())}
    return [(p, tasks[p.name]) for p in sorted(harness.iterdir())
            if p.is_dir() and (p / "rows" / "rows.jsonl").exists() and p.name in tasks]


def _copy_episode(src: Path, dst: Path, task_id: str) -> None:
    (dst / "rows").mkdir(parents=True)
    shutil.copyfile(src / "grade_inputs.json", dst / "grade_inputs.json")
    for path in sorted((src / "rows").iterdir()):
        data = path.read_bytes()
        data = distinct_png(data, f"{task_id}/{path.name}") if path.suffix == ".png" else data
        (dst / "rows" / path.name).write_bytes(data)


def corpus(episodes: int) -> Path:
    """The run dir (made once per size): tasks.jsonl, results.jsonl, one folder per episode, and its judge dir."""
    run_dir = WORK / f"corpus-{episodes}"
    if (run_dir / "tasks.jsonl").exists():
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(Path(f"{run_dir}_judge"), ignore_errors=True)
    sources, judge_dir = _sources(harness_run_dir()), Path(f"{run_dir}_judge")
    judge_dir.mkdir(parents=True)
    tasks, results = [], []
    print(f"making the corpus: {episodes:,} episodes, every step image distinct (cached in {run_dir})", flush=True)
    for n in range(episodes):
        src, task = sources[n % len(sources)]
        site = f"{task['site']}{n // len(sources) % SITE_COPIES}"
        task_id = f"tg-{site}-{n:05d}"
        _copy_episode(src, run_dir / task_id, task_id)
        tasks.append(json.dumps({**task, "task_id": task_id, "site": site, "sites": [site]}))
        results.append(json.dumps({"task_id": task_id, "ok": n % 3 != 0}))
        label = int(n % 10 != 0)
        (judge_dir / f"{task_id}.json").write_text(json.dumps({
            "task_id": task_id, "predicted_label": label, "verdict": "SUCCESS" if label else "NOT SUCCESS",
            "response": json.dumps({"parts": [], "verdict": "SUCCESS" if label else "NOT SUCCESS"}),
            "model": "bench"}))
    (run_dir / "results.jsonl").write_text("\n".join(results) + "\n")
    (run_dir / "tasks.jsonl").write_text("\n".join(tasks) + "\n")  # last: its presence says the corpus is whole
    return run_dir


def _app_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TASKGEN_VAR_DIR=str(WORK / "app"), TASKGEN_DATA_ROOT=str(WORK),
               DJANGO_SETTINGS_MODULE="taskgen.settings")
    return env


def app_import(run_dir: Path) -> None:
    """The corpus in the app's own embedded database (once per corpus)."""
    done = WORK / "app" / f"imported-{run_dir.name}"
    if done.exists():  # the app's schema may have moved on since the import: bring the database along
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=_app_env(), check=True,
                       stdout=subprocess.DEVNULL)
        return
    shutil.rmtree(WORK / "app", ignore_errors=True)
    (WORK / "app").mkdir(parents=True)
    started = time.perf_counter()
    for args in (["migrate", "-v0"], ["taskgen", "import", str(run_dir), "--tasks", str(run_dir / "tasks.jsonl")]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=_app_env(), check=True,
                       stdout=subprocess.DEVNULL)
    done.write_text("")
    print(f"imported into the app in {time.perf_counter() - started:.0f} s", flush=True)


def _timed(command: list[str], env: dict) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system: a busy machine inflates them far less than wall time) and peak
    resident memory (MB) of one process run to its end."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[:4]} failed")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run_reference(run_dir: Path, out: Path, budget: int) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(SHIM), "SEED_ROOT": str(WORK)}
    return _timed([sys.executable, str(REFERENCE), "rows", str(run_dir), "--out", str(out),
                   "--tasks", str(run_dir / "tasks.jsonl"), "--budget", str(budget)], env)


def run_app(run_dir: Path, out: Path, budget: int, workers: int | None) -> tuple[float, float, float]:
    threads = ["--workers", str(workers)] if workers else []  # the export run's units worked by N engine workers here
    # The reference's selection: every judged success (the app's default leaves out what a verifier failed, 1,800 of
    # this corpus's 5,400, and would write another set of rows than the reference's).
    return _timed([sys.executable, "manage.py", "taskgen", "rows", str(run_dir), "--out", str(out),
                   "--budget", str(budget), "--include-verifier-failed", *threads], _app_env())


def _row(label: str, runs: list[tuple[float, float, float]], rows: int, reference: list | None = None) -> str:
    seconds, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    memory = max(r[2] for r in runs)
    ratio = ""
    if reference:
        ratio = (f"   {seconds / statistics.median(r[0] for r in reference):.2f}x the reference's time, "
                 f"{cpu / statistics.median(r[1] for r in reference):.2f}x its CPU")
    return (f"  {label:<30} median {seconds:6.2f} s ({rows / seconds:,.0f} rows/s), cpu {cpu:5.1f} s, peak "
            f"{memory:4.0f} MB  [{', '.join(f'{r[0]:.1f}' for r in runs)} s]{ratio}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=6000)  # the harness's episodes are short: 27,644 rows
    parser.add_argument("--budget", type=int, default=27644)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", default="", help="`taskgen rows --workers` values to try besides the default "
                        "(engine workers in the command's process, each writing its batch with a few threads), e.g. 2")
    args = parser.parse_args()
    if not REFERENCE.exists() or not (SHIM / "helpers").is_dir():
        print(f"export: skipped - the reference and its shim are not at {REFERENCE} (set TASKGEN_REFERENCE)")
        return 0
    run_dir = corpus(args.episodes)
    app_import(run_dir)
    variants = [None, *(int(w) for w in args.workers.split(",") if w)]
    times: dict[str, list] = {"reference": [], **{f"app {w or 'default'}": [] for w in variants}}
    reports: dict[str, bytes] = {}
    for repeat in range(args.repeats):  # interleaved: each repeat runs every side once, in turn, the order flipped
        for name in list(times) if repeat % 2 == 0 else list(times)[::-1]:  # every other repeat (none always second)
            out = WORK / "out" / f"{name.replace(' ', '-')}-{repeat}"
            shutil.rmtree(out, ignore_errors=True)
            os.sync()  # the last side's 1.3 GB still being written back to disk would slow whichever side runs next
            if name == "reference":
                times[name].append(run_reference(run_dir, out, args.budget))
            else:
                times[name].append(run_app(run_dir, out, args.budget, variants[list(times).index(name) - 1]))
            reports[name] = (out / "_report.json").read_bytes()
            shutil.rmtree(out, ignore_errors=True)
            print(f"  repeat {repeat + 1}: {name:<14} {times[name][-1][0]:6.2f} s  (load {os.getloadavg()[0]:.1f})",
                  flush=True)
    report = json.loads(reports["reference"])
    rows = report["selected_rows"]
    print(f"rows export, {report['selected_trajectories']:,} episodes and {rows:,} rows of {args.episodes:,} "
          f"({report['sites']} sites), every step image distinct; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} (wall clock: a busy machine inflates it)")
    for name, runs in times.items():
        label = "app, --workers 1 (default)" if name == "app default" else (
            f"app, --workers {name.split()[1]}" if name != "reference" else "reference `rows` (copytree)")
        print(_row(label, runs, rows, None if name == "reference" else times["reference"]))
    same = all(body == reports["reference"] for body in reports.values())
    print(f"  _report.json byte-identical with the reference's: {'yes' if same else 'NO'}; targets: app no slower "
          f"than the reference, peak under {MEMORY_TARGET_MB} MB")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
