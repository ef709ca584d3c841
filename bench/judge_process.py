"""The app's judge measured as a user runs it (bench/judge.py): `python manage.py taskgen judge RUN --workers 16`, a
whole process of its own (Python's start, Django's setup, the run's start, the threads, the summary), and two
such processes working one run: `taskgen resume PIPELINE_RUN --workers 16` twice at once, the command a second
machine runs to join a run (the engine leases each unit to one of them). Wall time from the processes' start to
their end, and their CPU from os.wait4 (the process and any children it waited for).

Each measurement judges the run under a judge config of its own (a model name of its own: nothing is answered from
an earlier measurement's judgments), against the fake Gemini the caller started.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench.cpu import BackendsSampled, machine_cpu, machine_settle

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py"), "taskgen"]


@dataclass
class Measured:
    """What whole processes did: units judged, wall seconds from the first start to the last end, CPU seconds of
    them all (user + system, children included), and the fake's CPU seconds meanwhile."""

    judged: int
    wall: float
    cpu: float
    fake_cpu: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)  # CPU seconds by whom: each process, the fake, PostgreSQL
    machine: tuple[float, float] = (0.0, 0.0)  # the whole machine's CPU seconds meanwhile: (busy, all)
    quiet: str = ""  # how quiet the machine was when it started (machine_settle)
    timeline: Timeline | None = None  # where the wall went: start, calls, end (from the fake's window)

    def where(self) -> str:
        """Where the CPU went, in cores over the wall (the machine has os.cpu_count() of them): each process, the
        fake, this database's PostgreSQL backends, and the rest of the machine (this benchmark, other work)."""
        busy, every = self.machine
        words = [f"{name} {cpu / self.wall:.2f}" for name, cpu in self.parts.items()]
        rest = busy - sum(self.parts.values())
        return (", ".join(words) + f", the rest of the machine {rest / self.wall:.2f}; the machine busy "
                f"{busy / max(every, 1e-9):.0%} of its {every / self.wall:.1f} cores")

    def rate(self) -> float:
        return self.judged / self.wall

    def cpu_ms(self) -> float:
        return self.cpu * 1000 / max(1, self.judged)


@dataclass(frozen=True)
class Timeline:
    """A whole-process measurement's wall in three: from the processes' start to the first call at the fake (Python,
    Django, the SDK's import, the run's start), the calls (the first's arrival to the last's answer), and from the
    last answer to the last process's end (the last judgments stored, the summary, the exit)."""

    start: float
    calls: float
    end: float
    count: int

    def words(self, *, places: int, latency: float) -> str:
        """The three, and the calls against their floor: `count` calls on `places` take ceil(count / places)
        calls' time at least."""
        floor = math.ceil(self.count / places) * latency
        return (f"first call {self.start:.2f} s after the start; {self.count} calls in {self.calls:.2f} s "
                f"({floor / self.calls:.1%} of their floor, {math.ceil(self.count / places)} x {latency} s); "
                f"the end {self.end:.2f} s after the last answer")


def fake_get(base_url: str, path: str) -> dict:
    """One of the fake's own GET answers (tests/fakes/model_server.py: /_fake/in-flight, /_fake/window), from the
    base URL the app is given (its path, if any, left out)."""
    root = urlunsplit(urlsplit(base_url)._replace(path="", query="", fragment=""))
    with urllib.request.urlopen(f"{root}{path}", timeout=10) as answer:  # noqa: S310 (our own fake on 127.0.0.1)
        return json.loads(answer.read())


def fake_window(base_url: str, *, reset: bool) -> dict:
    """The fake's window of calls (first arrival, last answer, count); reset: begin a new one."""
    return fake_get(base_url, "/_fake/window" + ("?reset=1" if reset else ""))


def window_begin(base_url: str) -> float:
    """A new window of calls at the fake, begun now: the Unix time a timeline counts from (timeline_of)."""
    fake_window(base_url, reset=True)
    return time.time()


def timeline_of(base_url: str, started: float, ended: float) -> Timeline | None:
    """The timeline of the calls since window_begin (None when there were none), ending its window."""
    window = fake_window(base_url, reset=True)
    if not window["calls"]:
        return None
    return Timeline(window["first"] - started, window["last"] - window["first"], ended - window["last"],
                    window["calls"])


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) a running process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_all(processes: list[subprocess.Popen]) -> tuple[list[float], list[int]]:
    """Wait for every process (os.wait4: its rusage, its waited-for children's included); the CPU seconds of each,
    exit codes."""
    cpus, codes = [], []
    for process in processes:
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        cpus.append(usage.ru_utime + usage.ru_stime)
        codes.append(process.returncode)
    return cpus, codes


def _measured(judged: int, wall: float, cpus: list[float], names: list[str], fake: float, postgres: float,
              machine: tuple[float, float], quiet: str) -> Measured:
    parts = {**dict(zip(names, cpus, strict=True)), "the fake": fake, "PostgreSQL": postgres}
    return Measured(judged, wall, sum(cpus), fake, parts, machine, quiet)


def quiet_start() -> str:
    """Wait for a quiet machine (bench/cpu.py machine_settle) before a figure is taken: the step before (this
    benchmark's import, the previous measurement's PostgreSQL autovacuum) must not run inside it. Says how quiet."""
    waited, busy = machine_settle()
    return f"started {busy:.0%} busy after {waited:.0f} s"


def _start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    """The command started with its output in `log` (a pipe left unread would stop it once full)."""
    with log.open("w") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _failed(what: str, logs: list[Path]) -> SystemExit:
    return SystemExit(f"{what} failed:\n" + "\n".join(log.read_text()[-2000:] for log in logs))


def judge_command(*, run: str, model: str, workers: int, images: str) -> list[str]:
    """The user's command: judge the run here with `workers` calls in flight."""
    return [*MANAGE, "judge", run, "--provider", "gemini", "--model", model, "--images", images,
            "--workers", str(workers)]


def judge_whole_process(*, run: str, model: str, workers: int, images: str, env: dict, fake_pid: int, logs: Path,
                        prefix: list[str] | None = None) -> Measured:
    """One `taskgen judge RUN --workers N` process (`prefix`: run under a profiler, e.g. py-spy record --); its
    output in `logs`/judge-<model>.log."""
    log = logs / f"judge-{model}.log"
    quiet = quiet_start()
    fake_before, machine_before = process_cpu(fake_pid), machine_cpu()
    started_at, started = window_begin(env["GOOGLE_GEMINI_BASE_URL"]), time.perf_counter()
    with BackendsSampled() as backends:
        process = _start([*(prefix or []), *judge_command(run=run, model=model, workers=workers, images=images)],
                         env, log)
        cpus, codes = _wait_all([process])
    wall, ended_at = time.perf_counter() - started, time.time()
    if codes[0] != 0:
        raise _failed("taskgen judge", [log])
    summary = json.loads([line for line in log.read_text().splitlines() if line.startswith("{")][-1])
    measured = _measured(summary["episodes"] - summary["no_verdict"], wall, cpus, ["the process"],
                         process_cpu(fake_pid) - fake_before, backends.cpu, _since(machine_before), quiet)
    measured.timeline = timeline_of(env["GOOGLE_GEMINI_BASE_URL"], started_at, ended_at)
    return measured


def _since(before: tuple[float, float]) -> tuple[float, float]:
    after = machine_cpu()
    return after[0] - before[0], after[1] - before[1]


def judge_two_processes(*, pipeline_run_id: int, judged, workers: int, env: dict, fake_pid: int,
                        logs: Path) -> Measured:
    """Two `taskgen resume PIPELINE_RUN --workers N` processes started together on a run started (and not worked)
    by the caller; `judged()` counts the verdicts after."""
    command = [*MANAGE, "resume", str(pipeline_run_id), "--workers", str(workers)]
    files = [logs / f"resume-{pipeline_run_id}-{n}.log" for n in range(2)]
    quiet = quiet_start()
    fake_before, machine_before = process_cpu(fake_pid), machine_cpu()
    started_at, started = window_begin(env["GOOGLE_GEMINI_BASE_URL"]), time.perf_counter()
    with BackendsSampled() as backends:
        processes = [_start(command, env, log) for log in files]
        cpus, codes = _wait_all(processes)
    wall, ended_at = time.perf_counter() - started, time.time()
    if any(codes):
        raise _failed("taskgen resume", files)
    measured = _measured(judged(), wall, cpus, ["resume 1", "resume 2"], process_cpu(fake_pid) - fake_before,
                         backends.cpu, _since(machine_before), quiet)
    measured.timeline = timeline_of(env["GOOGLE_GEMINI_BASE_URL"], started_at, ended_at)
    return measured
