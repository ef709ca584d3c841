"""Real-size screenshots for benchmarks: the sandbox harness run once (headless Chromium, scripted agent, 1280x800
PNGs), cached under var/bench/harness/, and corpora of reference run dirs built from it in which every screenshot is
distinct (each copy gets its own PNG text chunk: the same pixels, different bytes and hash, as every step of a real
episode is a new page state).

    from bench.real_screens import harness_run_dir, corpus_run_dir
    source = harness_run_dir()                       # runs the harness the first time (a few minutes)
    run_dir = corpus_run_dir(source, out, episodes=560)
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS_VAR = ROOT / "var" / "bench" / "harness"
HARNESS_RUN = "shots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def harness_run_dir() -> Path:
    """The sandbox harness's run dir of the 62 sandbox tasks (made once, with the embedded defaults)."""
    run_dir = HARNESS_VAR / "data" / "attempts" / HARNESS_RUN
    made = HARNESS_VAR / "complete"  # written once the harness's command succeeded: a failed run is not a cache
    if made.exists() and (run_dir / "tasks.jsonl").exists():
        return run_dir
    shutil.rmtree(HARNESS_VAR, ignore_errors=True)
    HARNESS_VAR.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TASKGEN_VAR_DIR=str(HARNESS_VAR), TASKGEN_DATA_ROOT=str(HARNESS_VAR / "data"))
    print("capturing real screenshots: the sandbox harness runs once (cached in var/bench/harness/)", flush=True)
    for args in (["migrate", "-v0"], ["taskgen", "attempt", "--tasks", "sandbox/tasks.jsonl", "--agent", "scripted",
                                      "--name", HARNESS_RUN, "--inline"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    made.write_text("the sandbox harness's run finished\n")
    return run_dir


def distinct_png(data: bytes, tag: str) -> bytes:
    """The same image with a tEXt chunk after its header: other bytes, same pixels, decoders read it unchanged."""
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    header_end = len(PNG_SIGNATURE) + 8 + struct.unpack(">I", data[8:12])[0] + 4
    body = b"Comment\0" + tag.encode()
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return data[:header_end] + chunk + data[header_end:]


def _episode_folders(source: Path) -> list[Path]:
    return sorted(p for p in source.iterdir() if p.is_dir() and (p / "grade_inputs.json").exists())


def _copy_episode(src: Path, dst: Path, tag: str) -> None:
    """One episode folder with its evidence as recorded and every screenshot made distinct by `tag`."""
    (dst / "screenshots").mkdir(parents=True)
    shutil.copyfile(src / "grade_inputs.json", dst / "grade_inputs.json")
    for shot in sorted((src / "screenshots").glob("step_*.png")):
        (dst / "screenshots" / shot.name).write_bytes(distinct_png(shot.read_bytes(), f"{tag}/{shot.name}"))
    if (src / "final.png").exists():
        (dst / "final.png").write_bytes(distinct_png((src / "final.png").read_bytes(), f"{tag}/final.png"))


def corpus_run_dir(source: Path, out: Path, *, episodes: int) -> Path:
    """A run dir of `episodes` episodes copied round robin from `source`, every screenshot distinct, with its
    tasks.jsonl inside (the reference's judge reads it there) and its results.jsonl; made once per size."""
    run_dir = out / f"corpus-{episodes}"
    if (run_dir / "tasks.jsonl").exists():
        return run_dir
    shutil.rmtree(run_dir, ignore_errors=True)
    folders = _episode_folders(source)
    tasks = {t["task_id"]: t for t in map(json.loads, (source / "tasks.jsonl").read_text().splitlines())}
    results = {r["task_id"]: r["ok"] for r in map(json.loads, (source / "results.jsonl").read_text().splitlines())}
    lines, outcomes = [], []
    for n in range(episodes):
        src = folders[n % len(folders)]
        task_id = f"bench-{n:04d}-{src.name}"
        _copy_episode(src, run_dir / task_id, task_id)
        lines.append(json.dumps({**tasks[src.name], "task_id": task_id}))
        outcomes.append(json.dumps({"task_id": task_id, "ok": results.get(src.name, False)}))
    (run_dir / "results.jsonl").write_text("\n".join(outcomes) + "\n")
    (run_dir / "tasks.jsonl").write_text("\n".join(lines) + "\n")  # last: its presence says the corpus is whole
    return run_dir
