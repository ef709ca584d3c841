"""The user's own harness: an admin-configured command template (settings.EXTERNAL_HARNESSES_JSON, the JSON of
TASKGEN_EXTERNAL_HARNESSES; never editable from a page) run on a tasks file, writing a reference run dir.

The template is split like a shell line first (shlex) and each piece filled in afterwards, so a path with spaces or
quotes stays one argument and nothing is ever read by a shell. The process runs in its own session (so a stop ends
its children too), in the data root, with a time limit; its output (stdout and stderr, merged) goes to a log file
and its last lines to the caller as they come.
"""
from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import string
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from taskgen.names import plain_name_check

PLACEHOLDERS = ("tasks", "run_dir", "arm")
TAIL_LINES = 40
LOG_CAP_BYTES = 50 * 1024 * 1024  # a harness printing without end fills no disk: the tail is kept anyway
# What a harness never needs from this app's environment: the app's own database, broker, cache and their secrets.
ENV_WITHHELD = ("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY_FILE", "DATABASE_URL", "DATABASE_PASSWORD",
                "DATABASE_PASSWORD_FILE", "CELERY_BROKER_URL", "REDIS_URL", "REDIS_PASSWORD", "REDIS_PASSWORD_FILE",
                "TASKGEN_CACHE_URL")


@dataclass(frozen=True)
class ExternalHarness:
    name: str
    command: str
    timeout_seconds: int


@dataclass
class HarnessOutcome:
    """How a harness run ended: its exit code (None when it was stopped), its last lines, and why it was stopped."""

    exit_code: int | None
    tail: list[str] = field(default_factory=list)
    lines: int = 0
    seconds: float = 0.0
    stopped: str = ""  # "" | "cancelled" | "timed out"


def _fields(command: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(command) if name is not None}
    except ValueError as exc:
        raise ValueError(f"the command {command!r} has a broken placeholder: {exc}") from exc


def _one(name: str, value, default_timeout: int) -> ExternalHarness:
    spec = {"command": value} if isinstance(value, str) else value
    if not isinstance(spec, dict) or not isinstance(spec.get("command"), str) or not spec["command"].strip():
        raise ValueError(f"harness {name!r}: give a command string (or {{\"command\": ..., \"timeout_seconds\": N}})")
    unknown = _fields(spec["command"]) - set(PLACEHOLDERS)
    if unknown:
        raise ValueError(f"harness {name!r}: unknown placeholder(s) {', '.join(sorted(unknown))}; use {{tasks}}, "
                         "{run_dir}, {arm}")
    if not {"tasks", "run_dir"} <= _fields(spec["command"]):
        raise ValueError(f"harness {name!r}: the command must take {{tasks}} and {{run_dir}}")
    timeout = spec.get("timeout_seconds", default_timeout)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        raise ValueError(f"harness {name!r}: timeout_seconds must be a whole number of seconds")
    shlex.split(spec["command"])  # an unclosed quote fails here, at start, not at the first run
    return ExternalHarness(name=name, command=spec["command"], timeout_seconds=timeout)


def external_harnesses_parse(text: str, *, default_timeout: int) -> dict[str, ExternalHarness]:
    """The harnesses of TASKGEN_EXTERNAL_HARNESSES: a JSON object {name: command or {command, timeout_seconds}};
    ValueError says what is wrong."""
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError("a JSON object of name: command")
    for name in raw:
        plain_name_check(name, what="the harness name")  # NotPlainName is a ValueError
    return {name: _one(name, value, default_timeout) for name, value in raw.items()}


def external_harnesses() -> dict[str, ExternalHarness]:
    """The admin's harnesses, from settings.EXTERNAL_HARNESSES_JSON (TASKGEN_EXTERNAL_HARNESSES); ValueError says what
    is wrong (checked once when Django starts: taskgen/startup.py)."""
    return _harnesses_of(settings.EXTERNAL_HARNESSES_JSON, settings.EXTERNAL_HARNESS_SECONDS)


@functools.lru_cache(maxsize=4)
def _harnesses_of(text: str, default_timeout: int) -> dict[str, ExternalHarness]:
    return external_harnesses_parse(text, default_timeout=default_timeout)


def external_command(harness: ExternalHarness, *, tasks: Path, run_dir: Path, arm: str) -> list[str]:
    """The command's arguments: the template split first, then each piece filled in (no shell, no re-splitting)."""
    values = {"tasks": str(tasks), "run_dir": str(run_dir), "arm": arm}
    return [piece.format(**values) for piece in shlex.split(harness.command)]


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_WITHHELD}


class _Reader(threading.Thread):
    """Reads the process's output to the log file (up to a cap) and keeps the last lines."""

    def __init__(self, stream, log_path: Path) -> None:
        super().__init__(daemon=True, name="harness-output")
        self.stream, self.log_path = stream, log_path
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.lines = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        written = 0
        with self.log_path.open("ab") as log:
            for raw in iter(self.stream.readline, b""):
                if written < LOG_CAP_BYTES:
                    log.write(raw)
                    written += len(raw)
                with self.lock:
                    self.tail.append(raw.decode("utf-8", errors="replace").rstrip("\r\n")[:2000])
                    self.lines += 1

    def snapshot(self) -> tuple[list[str], int]:
        with self.lock:
            return list(self.tail), self.lines


def _stop(process: subprocess.Popen) -> None:
    """End the process and its children: TERM to its session, KILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def external_run(*, harness: ExternalHarness, args: list[str], cwd: Path, log_path: Path,
                 on_output: Callable[[list[str], int], None], should_stop: Callable[[], bool],
                 poll_seconds: float = 1.0) -> HarnessOutcome:
    """Run the harness to its end, its time limit, or until `should_stop()` (checked every poll); `on_output(tail,
    lines)` is called at most once a poll with the output so far."""
    started = time.monotonic()
    try:
        process = subprocess.Popen(args, cwd=cwd, env=_environment(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        return HarnessOutcome(exit_code=127, tail=[f"could not start {args[0]!r}: {exc.strerror or exc}"])
    reader = _Reader(process.stdout, log_path)
    reader.start()
    stopped, shown = "", -1
    while process.poll() is None:
        if should_stop():
            stopped = "cancelled"
        elif time.monotonic() - started > harness.timeout_seconds:
            stopped = "timed out"
        if stopped:
            _stop(process)
            break
        tail, lines = reader.snapshot()
        if lines != shown:
            on_output(tail, lines)
            shown = lines
        time.sleep(poll_seconds)
    process.wait()
    reader.join(timeout=10)
    tail, lines = reader.snapshot()
    on_output(tail, lines)
    return HarnessOutcome(exit_code=None if stopped else process.returncode, tail=tail, lines=lines,
                          seconds=round(time.monotonic() - started, 1), stopped=stopped)
