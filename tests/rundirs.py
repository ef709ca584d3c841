"""Run dirs in the reference format, built inside tests with real PNGs from Pillow."""
from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image


def png(colour: tuple[int, int, int] = (200, 30, 30), size: tuple[int, int] = (64, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def task_line(task_id: str, site: str = "shop", kind: str = "info", **extra) -> dict:
    return {"kind": "proposed", "task_id": task_id, "site": site, "sites": [site], "macro": "proposed", "macros": [],
            "instruction": f"Find the price of {task_id}", "start_path": f"/sites/{site}/", "task_kind": kind,
            "verifier": None, **extra}


def grade_inputs(n: int = 0) -> dict:
    return {
        "actions": [{"click": {"index": 3}}, {"type": {"text": "mug"}}, {"answer": {"text": f"{n} EUR"}},
                    {"done": {}}],
        "answer": f"The mug costs {n} EUR",
        "log": [{"method": "GET", "path": "/sites/shop/search", "query": {"q": "mug"}, "body": None, "status": 200},
                {"method": "POST", "path": "/sites/shop/cart", "query": {}, "body": {"qty": "1"}, "status": 302}],
        "changes": [{"collection": "cart", "op": "create", "before": None, "after": {"id": n, "name": "mug"},
                     "changed": {"qty": 1}}],
        "seen": ["home page", f"Mug — {n} EUR"],
        "harness": {"version": 3},
    }


def write_episode(run_dir: Path, task_id: str, *, steps: int = 3, final: bool = True, rows: bool = True,
                  n: int = 0) -> Path:
    folder = run_dir / task_id
    (folder / "screenshots").mkdir(parents=True)
    (folder / "grade_inputs.json").write_text(json.dumps(grade_inputs(n)))
    for step in range(steps):
        (folder / "screenshots" / f"step_{step}.png").write_bytes(png((step * 20 % 256, 100, n % 256)))
    if final:
        (folder / "final.png").write_bytes(png((0, 0, 0)))
    if rows:
        (folder / "rows").mkdir()
        (folder / "rows" / "rows.jsonl").write_text('{"step": 0, "action": "click"}\n{"step": 1}\n')
        (folder / "rows" / "episode.json").write_text(f'{{"task_id": "{task_id}",  "steps": 2}}\n')
        (folder / "rows" / "step_0.png").write_bytes(png((0, 0, 0)))  # the same bytes as final.png
    return folder


def write_tasks(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def build_run(base: Path, task_ids: list[str], *, tasks_beside: bool = False, **episode) -> Path:
    """A run dir `base/run` with one episode per task id and the tasks file inside it (or beside it)."""
    run_dir = base / "run"
    run_dir.mkdir(parents=True)
    for n, task_id in enumerate(task_ids):
        write_episode(run_dir, task_id, n=n, **episode)
    write_tasks((base if tasks_beside else run_dir) / "tasks.jsonl", [task_line(t) for t in task_ids])
    return run_dir
