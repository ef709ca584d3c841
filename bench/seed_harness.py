"""The seed-scale benchmark's fake harness (bench/seed_scale.py): run as a user's harness is, `python seed_harness.py
--tasks FILE --arm ARM --out RUN_DIR --pool DIR`, it writes every task's episode folder at once in the reference's
run-dir format, as a real harness leaves them: grade_inputs.json (actions, answer, a request log of 8-30 lines, 0-3
data changes, the text of each page), screenshots/step_N.png and final.png (real-size 1280x800 PNGs from --pool, each
made distinct with its own text chunk: every step of a real episode is a new page state), and rows/ (rows.jsonl, a row
per step with its step image, the same bytes as the screenshot, and episode.json). An episode has 2 to 7 steps.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.real_screens import distinct_png  # noqa: E402


def _episode(task: dict, pool: list[bytes], out: Path) -> None:
    task_id = task["task_id"]
    seed = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16)
    steps = 2 + seed % 6
    home = task.get("start_path") or "/"
    actions = [{"click": {"index": 3 + n}} for n in range(steps - 1)] + [{"answer": {"text": f"done: {task_id}"}}]
    log = [{"method": "POST" if n % 9 == 4 else "GET", "path": f"{home}page/{n}", "query": {"q": f"item {seed % 97}"},
            "body": {"qty": 1} if n % 9 == 4 else None, "status": 200} for n in range(8 + seed % 23)]
    changes = [{"collection": "cart_items", "op": "create", "before": None, "after": {"id": n, "qty": 1}}
               for n in range(seed % 4)]
    grade = {"actions": actions, "answer": f"done: {task_id}", "log": log, "changes": changes,
             "seen": [f"{task['instruction']} - page {n}" for n in range(steps)]}
    ep = out / task_id
    (ep / "screenshots").mkdir(parents=True, exist_ok=True)
    (ep / "rows").mkdir(exist_ok=True)
    (ep / "grade_inputs.json").write_text(json.dumps(grade), encoding="utf-8")
    rows = []
    for n in range(1, steps + 1):
        png = distinct_png(pool[(seed + n) % len(pool)], f"{task_id}/step_{n}")
        (ep / "screenshots" / f"step_{n}.png").write_bytes(png)
        (ep / "rows" / f"step_{n}.png").write_bytes(png)
        rows.append({"task_id": task_id, "step": n, "action": actions[n - 1], "image": f"step_{n}.png"})
    (ep / "final.png").write_bytes(distinct_png(pool[seed % len(pool)], f"{task_id}/final"))
    (ep / "rows" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (ep / "rows" / "episode.json").write_text(json.dumps({"task_id": task_id, "steps": steps, "finished": "answered"}),
                                              encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--arm", default="base")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pool", type=Path, required=True)
    args = parser.parse_args()
    pool = [p.read_bytes() for p in sorted(args.pool.glob("*.png"))]
    tasks = [json.loads(line) for line in args.tasks.read_text(encoding="utf-8").splitlines() if line.strip()]
    for n, task in enumerate(tasks):
        _episode(task, pool, args.out)
        if n % 1000 == 999:
            print(f"seed harness: {n + 1} episodes written", flush=True)
    print(f"seed harness: {len(tasks)} episodes written to {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
