"""Benchmark: a model agent in the harness, against a fake OpenAI-compatible server on 127.0.0.1 that answers each
sandbox task's known solution (reading element numbers from the prompt, as a model would).

1. Harness overhead per step, the model's time left out: screenshot, element list, page text, prompt, parsing,
   acting, evidence (the fake answers at once; its own time is measured by the client and subtracted).
2. Episodes per minute at 2 browser workers (`taskgen attempt --workers 2`, real Celery worker processes) with the
   fake model answering in 1 s, against the ideal: 2 workers * 60 s / (steps per episode * 1 s).
Targets (issue 14): overhead under 250 ms per step; at least 80% of the ideal. Runs in a throwaway var dir (SQLite,
embedded broker). The machine's load is printed beside each figure.

    .venv/bin/python bench/agent.py [--episodes 12] [--latency 1.0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agent_policy import PerTask  # noqa: E402  (the bench runs from the checkout)
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} on {os.cpu_count()} CPUs"


def _tasks(count: int) -> list[dict]:
    """The first `count` sandbox tasks, round robin over the sites (so episodes differ in length and site)."""
    lines = (ROOT / "sandbox" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    by_site: dict[str, list[dict]] = {}
    for task in (json.loads(line) for line in lines if line.strip()):
        by_site.setdefault(task["site"], []).append(task)
    mixed = [t for group in zip(*by_site.values(), strict=False) for t in group]
    return mixed[:count]


def _shell(env: dict, code: str) -> str:
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def _attempt(env: dict, name: str, tasks_file: Path, workers: int) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "manage.py", "taskgen", "attempt", "--tasks", str(tasks_file), "--agent",
                           "openai-compatible", "--name", name, "--workers", str(workers)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"taskgen attempt failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    code = ("import json; from taskgen.models import PipelineRun as P, WorkUnit as U; "
            f"r = P.objects.filter(params__name={name!r}).get(); "
            "print(json.dumps({'window': (r.finished_at - r.started_at).total_seconds(), 'done': r.done, "
            "'failed': r.failed, 'units': [dict(u[0], finished=u[1].timestamp()) for u in U.objects.filter("
            "pipeline_run=r, status='done').values_list('result', 'finished_at')]}))")
    return {**json.loads(_shell(env, code)), "wall": time.perf_counter() - started}


def overhead(env: dict, tasks_file: Path) -> float:
    """ms per step outside the model: the whole episode's time less the model calls' own time, per step."""
    result = _attempt(env, "bench-overhead", tasks_file, workers=1)
    steps = sum(u["steps"] for u in result["units"])
    t: dict[str, float] = {}
    for unit in result["units"]:
        for key, seconds in unit["timings"].items():
            t[key] = t.get(key, 0.0) + seconds
    harness = t.get("browser", 0) + t.get("agent", 0) - t.get("model", 0) + t.get("app", 0) + t.get("write", 0)
    per_step = harness * 1000 / max(steps, 1)
    ms = {key: seconds * 1000 / max(steps, 1) for key, seconds in t.items()}
    rest = ms.get("browser", 0) - ms.get("screenshot", 0) - ms.get("observe", 0) - ms.get("act", 0)
    print(f"overhead: {per_step:.0f} ms per step outside the model over {steps} steps of {result['done']} episodes "
          f"(browser {ms.get('browser', 0):.0f} ms of which the sandbox site {ms.get('sandbox_server', 0):.0f} ms; "
          f"agent prompt+parse+client {ms.get('agent', 0) - ms.get('model', 0):.0f} ms; evidence and files "
          f"{ms.get('app', 0) + ms.get('write', 0):.0f} ms); in the browser per step: screenshot "
          f"{ms.get('screenshot', 0):.0f} ms, element list and text {ms.get('observe', 0):.0f} ms, acting "
          f"{ms.get('act', 0):.0f} ms, the rest (start page, browser start, final screen) {rest:.0f} ms; "
          f"target < 250 ms; {_load()}", flush=True)
    return per_step


def _steady_window(units: list[dict]) -> float:
    """Seconds from the first episode's start (its end less its own time) to the last episode's end: the run's
    time without the workers' start (Celery, Django, Chromium) and the import at the end."""
    starts = [u["finished"] - sum(v for k, v in u["timings"].items() if k in ("browser", "agent", "app", "write"))
              for u in units]
    return max(u["finished"] for u in units) - min(starts)


def throughput(env: dict, tasks_file: Path, latency: float, workers: int = 2) -> None:
    result = _attempt(env, "bench-throughput", tasks_file, workers=workers)
    steps = sum(u["steps"] for u in result["units"])
    episodes = result["done"]
    steady = _steady_window(result["units"])
    ideal = workers * 60 / (steps / max(episodes, 1) * latency)
    per_min, whole = episodes * 60 / steady, episodes * 60 / result["window"]
    print(f"throughput: {episodes} episodes ({result['failed']} failed), {steps / max(episodes, 1):.1f} steps each, "
          f"model {latency:.1f} s per step, {workers} browser workers: {per_min:.1f} episodes/min from the first "
          f"episode's start to the last one's end ({steady:.1f} s); ideal {ideal:.1f}/min -> {per_min / ideal:.0%} of "
          f"ideal (target >= 80%); {whole:.1f}/min over the whole run with worker start and import "
          f"({result['window']:.1f} s); {_load()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    tasks = _tasks(args.episodes)
    print(f"bench/agent.py: openai-compatible agent on {len(tasks)} sandbox tasks; {_load()}", flush=True)
    for latency, run in ((0.0, "overhead"), (args.latency, "throughput")):
        server = FakeOpenAI(latency=latency, answer=PerTask(tasks)).start()
        try:
            with tempfile.TemporaryDirectory(prefix="taskgen-bench-agent-") as var:
                env = {**os.environ, "TASKGEN_VAR_DIR": var, "CELERY_BROKER_URL": "filesystem://",
                       "OPENAI_BASE_URL": server.base_url, "TASKGEN_OPENAI_MODEL": "fake-qwen"}
                env.pop("DATABASE_URL", None)
                subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v0"], cwd=ROOT, env=env,
                               check=True)
                tasks_file = Path(var) / "tasks.jsonl"
                tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                                      encoding="utf-8")
                overhead(env, tasks_file) if run == "overhead" else throughput(env, tasks_file, latency)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
