"""The reference's own `judge` beside the app's (bench/judge.py --reference): the user's pipeline
(../shared/reference/taskgen.py, run through its shim) judges the same run dir against the same fake Gemini with the
same calls in flight, as a process of its own; its wall time, episodes/s against the same ideal, and CPU per judgment
(its whole process: it reads the files, formats the evidence and calls the SDK, as the app's judging processes do)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = Path(os.environ.get("TASKGEN_REFERENCE", ROOT.parent / "shared" / "reference" / "taskgen.py"))
SHIM = REFERENCE.parent / "shim"


def reference_judge(*, run_dir: Path, base_url: str, workers: int) -> dict:
    """Run the reference's judge over `run_dir` (its `<run dir>_judge` made afresh); its figures."""
    out = Path(f"{run_dir}_judge")
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(SHIM), "SEED_ROOT": str(run_dir.parent), "GOOGLE_GEMINI_BASE_URL": base_url}
    started, started_at = time.perf_counter(), time.time()
    process = subprocess.Popen([sys.executable, str(REFERENCE), "judge", str(run_dir), "--workers", str(workers)],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall, ended_at = time.perf_counter() - started, time.time()
    judged = len(list(out.glob("*.json")))
    if os.waitstatus_to_exitcode(status) != 0 or not judged:
        raise SystemExit(f"the reference's judge failed: {process.stderr.read().decode()[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"episodes": judged, "wall_s": round(wall, 2), "rate": round(judged / wall, 2), "cpu_s": cpu,
            "cpu_ms_per_judgment": round(cpu * 1000 / judged, 1), "started_at": started_at, "ended_at": ended_at}
