"""A small harness of our own for the external-harness tests, run as `python harness_script.py --tasks FILE --arm ARM
--out RUN_DIR` the way a user's harness is. The arm says how it behaves:

  base   writes a reference run dir for every task (grade_inputs.json, a screenshot, rows/, results.jsonl), exit 0
  fail   prints a few lines, then exits 3 without a run dir
  slow   prints a line every 0.1 s for a minute (to be cancelled or timed out); its pid and its child's go to pids.txt
  loud   prints 200,000 lines, then does what base does
  empty  prints a line and exits 0 without writing anything
  broken exits 0 with a run dir whose first episode's grade_inputs.json is not JSON and whose last is missing
  second exits 0 without writing anything the first time (it leaves a mark), then does what base does
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# A 1x1 PNG, so the importer stores a real image.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
                       "AAAABJRU5ErkJggg==")


def write_run_dir(tasks_file: Path, out: Path) -> None:
    tasks = [json.loads(line) for line in tasks_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    results = []
    for n, task in enumerate(tasks):
        ep = out / task["task_id"]
        (ep / "screenshots").mkdir(parents=True, exist_ok=True)
        (ep / "rows").mkdir(exist_ok=True)
        actions = [{"click": {"index": 1}}, {"answer": {"text": f"answer {n}"}}, {"done": {}}]
        grade = {"actions": actions, "answer": f"answer {n}", "log": [], "changes": [], "seen": ["a page"]}
        (ep / "grade_inputs.json").write_text(json.dumps(grade), encoding="utf-8")
        (ep / "screenshots" / "step_1.png").write_bytes(PNG)
        (ep / "rows" / "step_1.png").write_bytes(PNG)
        row = {"task_id": task["task_id"], "step": 1, "action": actions[0], "image": "step_1.png"}
        (ep / "rows" / "rows.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
        (ep / "rows" / "episode.json").write_text(json.dumps({"task_id": task["task_id"]}), encoding="utf-8")
        results.append({"task_id": task["task_id"], "ok": n % 2 == 0})
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--arm", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(f"harness: {args.arm} on {args.tasks.name}", flush=True)
    if args.arm == "fail":
        for n in range(30):
            print(f"episode {n}: <b>error</b> line", flush=True)
        print("Traceback: the model server refused the connection", file=sys.stderr, flush=True)
        return 3
    if args.arm == "slow":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        (args.out / "pids.txt").write_text(f"{os.getpid()} {child.pid}", encoding="utf-8")
        for n in range(600):
            print(f"working {n}", flush=True)
            time.sleep(0.1)
        return 0
    if args.arm == "empty":
        return 0
    if args.arm == "broken":
        write_run_dir(args.tasks, args.out)
        tasks = [json.loads(line) for line in args.tasks.read_text(encoding="utf-8").splitlines() if line.strip()]
        (args.out / tasks[0]["task_id"] / "grade_inputs.json").write_text("{not json", encoding="utf-8")
        for path in sorted((args.out / tasks[-1]["task_id"]).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (args.out / tasks[-1]["task_id"]).rmdir()
        return 0
    if args.arm == "second":
        mark = args.out / "second.mark"
        if not mark.exists():
            mark.write_text("ran once", encoding="utf-8")
            return 0
    if args.arm == "loud":
        sys.stdout.writelines(f"line {n} of a harness that talks a lot\n" for n in range(200_000))
        sys.stdout.flush()
    write_run_dir(args.tasks, args.out)
    print("harness: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
