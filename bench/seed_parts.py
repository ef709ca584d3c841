"""The seed-scale benchmark's parts (bench/seed_scale.py): the fake Gemini it runs in its own process, the Celery
workers as docker-compose runs them with their CPU counted, and each stage started on the engine, waited for and
measured."""
from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.cpu import backends_cpu, backends_note
from tests.fakes.gemini_server import DEFAULT_ANSWER, FakeGemini

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "bench" / "seed_scale"
JUDGE_IN_FLIGHT = 16  # the judge worker's calls in flight (TASKGEN_JUDGE_CONCURRENCY's default)
JUDGE_THREADS = 20  # the judge queue's threads (docker-compose.yml: TASKGEN_JUDGE_THREADS' default)
TICK = os.sysconf("SC_CLK_TCK")
NOT_SUCCESS = {"parts": [{"part": "the whole task", "done": False, "evidence": "fake server: not done"}],
               "verdict": "NOT SUCCESS"}


class SeedGemini(FakeGemini):
    """The fake Gemini without keeping what it was sent (7,280 judge requests of 3-8 screenshots would hold
    gigabytes), judging 3 episodes in 5 a success (by the request's hash, so the same request gets the same verdict),
    its latency set per stage."""

    def __init__(self) -> None:
        super().__init__(latency=0.0, count_images=False, keep_requests=False)
        self.answer = self._answer
        self.calls = 0

    def _answer(self, body: dict) -> dict:
        answer = self.default_answer(body)
        if answer is not DEFAULT_ANSWER:
            return answer  # a proposal's tasks
        digest = hashlib.sha256(json.dumps(body.get("contents", [])[:1], sort_keys=True)[:4000].encode()).digest()
        return DEFAULT_ANSWER if digest[0] % 5 < 3 else NOT_SUCCESS

    def _handle(self, handler) -> None:
        super()._handle(handler)
        with self._lock:
            self.calls += 1


def redis_flush(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def _group_cpu(pgid: int) -> float:
    """CPU seconds of every live process in a process group, with the children each has reaped."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / TICK


class Workers:
    """The compose file's workers and beat, each in a process group of its own (killed with its children at the end)."""

    COMMANDS = {
        "judge": ["worker", "-Q", "judge", "-P", "threads", "--concurrency", str(JUDGE_THREADS)],
        "browser": ["worker", "-Q", "browser", "-P", "prefork", "--concurrency", "2", "--max-tasks-per-child", "50"],
        "default": ["worker", "-Q", "default", "-P", "prefork", "--concurrency", "2"],
        "beat": ["beat"],
    }

    def __init__(self, logs: Path, env: dict) -> None:
        self.logs, self.env, self.processes = logs, env, {}

    def start(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        for name, command in self.COMMANDS.items():
            extra = ["-s", str(self.logs / "beat-schedule")] if name == "beat" else ["-n", f"{name}@%h"]
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "taskgen", *command, *extra, "--loglevel", "WARNING"],
                cwd=ROOT, env=self.env, stdout=(self.logs / f"{name}.log").open("w"), stderr=subprocess.STDOUT,
                start_new_session=True)
        time.sleep(8)  # every worker connected before the first run sends its messages

    def cpu(self) -> dict[str, float]:
        return {name: _group_cpu(process.pid) for name, process in self.processes.items()}

    def stop(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(10)


class Stages:
    """Each stage started on the engine as the web page or the command line starts it, waited for, measured."""

    def __init__(self, args, fake: SeedGemini, workers: Workers) -> None:
        self.args, self.fake, self.workers, self.figures = args, fake, workers, {}
        self.run_name, self.config_id = "seed-scale", None

    def _measure(self, name: str, start, ideal, where, unit: str, per=lambda run: run.total) -> object:
        """Start a stage, wait for its run to finish, and keep its figures: `ideal(calls, run)` is the fakes' floor,
        `where(run, wall)` where the time went, `per(run)` the units the overhead is counted in (named `unit`)."""
        from taskgen.models import PipelineRun

        workers_before, backends_before, own_before = self.workers.cpu(), backends_cpu(), time.process_time()
        calls_before, started = self.fake.calls, time.perf_counter()
        pipeline_run = start()
        backends_seen = dict(backends_before)
        while PipelineRun.objects.filter(pk=pipeline_run.pk, status=PipelineRun.Status.RUNNING).exists():
            time.sleep(0.5)
            backends_note(backends_seen)
        wall = time.perf_counter() - started
        pipeline_run.refresh_from_db()
        workers_after = self.workers.cpu()
        backends_note(backends_seen)
        worker_cpu = {k: round(workers_after[k] - workers_before[k], 2) for k in workers_after}
        backend_cpu = sum(cpu - backends_before.get(pid, 0.0) for pid, cpu in backends_seen.items())
        units, calls = per(pipeline_run), self.fake.calls - calls_before
        floor = ideal(calls, pipeline_run)
        figures = {"status": pipeline_run.status, "units": units, "unit": unit, "engine_units": pipeline_run.total,
                   "failed": pipeline_run.failed, "calls": calls,
                   "wall_s": round(wall, 1), "ideal_s": round(floor, 1),
                   "overhead_ms_per_unit": round((wall - floor) / max(units, 1) * 1000, 1),
                   "workers_cpu_s": worker_cpu, "postgres_cpu_s": round(backend_cpu, 1),
                   "bench_process_cpu_s": round(time.process_time() - own_before, 1),
                   "app_cpu_ms_per_unit": round((sum(worker_cpu.values()) + backend_cpu) / max(units, 1) * 1000, 1),
                   "load": round(os.getloadavg()[0], 1)}
        figures.update(where(pipeline_run, wall))
        self.figures[name] = figures
        print(f"{name:8s} {units:6,} {plural(unit)} ({pipeline_run.failed} failed, {pipeline_run.status}), {calls:5,} "
              f"model calls, in {wall:7.1f} s; the fakes' floor {floor:6.1f} s; overhead "
              f"{figures['overhead_ms_per_unit']:7.1f} ms per {unit}; CPU {figures['app_cpu_ms_per_unit']:6.1f} ms per "
              f"{unit} (workers {worker_cpu}, PostgreSQL "
              f"{backend_cpu:.1f} s); {json.dumps({k: v for k, v in figures.items() if k.startswith('where')})} "
              f"(load {figures['load']})", flush=True)
        return pipeline_run

    def propose(self, slugs: list[str]) -> None:
        from taskgen.engine.control import run_start
        from taskgen.engine.stage_table import workers_per_run
        from taskgen.models import PipelineRun

        self.fake.latency = self.args.propose_latency
        params = {"provider": "gemini", "sites": ",".join(slugs), "per_site": self.args.per_site,
                  "batch": self.args.batch}
        in_flight = min(workers_per_run(PipelineRun.Stage.PROPOSE), JUDGE_THREADS)  # a thread per worker message
        self._measure("propose", lambda: run_start(stage=PipelineRun.Stage.PROPOSE, params=params),
                      lambda calls, run: ideal_seconds(calls, self.args.propose_latency, in_flight),
                      lambda run, wall: {"where_calls_in_flight": in_flight, "where_tasks_kept": sum(
                          site.get("kept", 0) for site in (run.result or {}).get("sites", []))}, unit="batch")

    def attempt(self, slugs: list[str]) -> None:
        from django.conf import settings

        from taskgen.engine.control import run_start
        from taskgen.models import PipelineRun
        from taskgen.stages.propose.tasks_file import reviewed_tasks, tasks_jsonl_append

        tasks_file = Path(settings.DATA_ROOT) / "seed-tasks.jsonl"
        tasks_file.parent.mkdir(parents=True, exist_ok=True)
        tasks_jsonl_append(path=tasks_file, tasks=reviewed_tasks(sites=slugs, include_all=True))
        params = {"tasks_file": str(tasks_file), "agent": "external:seed", "name": self.run_name}

        def where(run, wall: float) -> dict:
            result = run.result or {}
            harness = result.get("harness_seconds") or 0
            episodes = result.get("episodes_added") or result.get("episodes") or 0
            rest = wall - harness
            return {"where_harness_s": round(harness, 1), "where_import_and_engine_s": round(rest, 1),
                    "where_episodes": episodes, "where_import_episodes_per_s": round(episodes / max(rest, 0.001), 1)}

        # the fake harness's own writing is the floor; the overhead is the adapter's, the import's and the engine's
        self._measure("attempt", lambda: run_start(stage=PipelineRun.Stage.ATTEMPT, params=params),
                      lambda calls, run: (run.result or {}).get("harness_seconds") or 0.0, where, unit="episode",
                      per=lambda run: (run.result or {}).get("episodes_added") or (run.result or {}).get("episodes")
                      or run.total)

    def judge(self) -> None:
        from taskgen.engine.control import run_start
        from taskgen.models import PipelineRun, Run

        self.fake.latency = self.args.judge_latency
        run = Run.objects.get(name=self.run_name)
        params = {"run": run.pk, "provider": "gemini"}
        pipeline_run = self._measure(
            "judge", lambda: run_start(stage=PipelineRun.Stage.JUDGE, params=params),
            lambda calls, run: ideal_seconds(calls, self.args.judge_latency, JUDGE_IN_FLIGHT),
            lambda run, wall: {"where_calls_in_flight": JUDGE_IN_FLIGHT,
                               "where_successes": (run.result or {}).get("success")}, unit="episode")
        self.config_id = pipeline_run.params["config_id"]

    def export(self) -> None:
        from taskgen.engine.control import run_start
        from taskgen.models import PipelineRun, Run

        run = Run.objects.get(name=self.run_name)
        out = WORK / "data" / "exports" / "seed-rows"
        params = {"run": run.pk, "out_dir": str(out), "budget": self.args.budget, "judge_config": self.config_id}

        def where(pipeline_run, wall: float) -> dict:
            report = json.loads((out / "_report.json").read_text()) if (out / "_report.json").exists() else {}
            return {"where_rows": report.get("selected_rows"), "where_episodes": report.get("selected_trajectories")}

        self._measure("export", lambda: run_start(stage=PipelineRun.Stage.EXPORT, params=params),
                      lambda calls, run: 0.0, where, unit="episode")


def plural(unit: str) -> str:
    return f"{unit}es" if unit.endswith("ch") else f"{unit}s"


def ideal_seconds(calls: int, latency: float, in_flight: int) -> float:
    """The fakes' floor: calls in waves of `in_flight`, each wave one latency."""
    return math.ceil(calls / in_flight) * latency if calls else 0.0
