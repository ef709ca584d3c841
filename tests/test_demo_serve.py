"""`make demo`'s last step: the web server and a real Celery worker start together, the banner says the login, and
Ctrl-C (SIGINT) stops both within 10 seconds, leaving no process behind."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.celery_worker
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def test_ctrl_c_stops_the_web_server_and_the_worker_within_ten_seconds(tmp_path):
    # its own SQLite database and embedded broker, whatever the test run itself uses
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["TASKGEN_VAR_DIR"] = str(tmp_path)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT, timeout=180)
    subprocess.run([*manage, "taskgen", "demo-setup"], env=env, check=True, cwd=ROOT, timeout=60,
                   capture_output=True)
    port = _free_port()
    demo = subprocess.Popen([*manage, "taskgen", "demo-serve", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = ""
        while "Ctrl-C stops" not in banner:
            line = demo.stdout.readline()
            assert line, f"demo-serve ended before its banner: {banner}"
            banner += line
        assert f"http://127.0.0.1:{port}/" in banner and "log in as admin / " in banner
        groups = [int(p) for p in _children(demo.pid)]
        assert len(groups) == 3  # two workers (judge: threads) and the web server, each leading its process group
        time.sleep(2)  # the worker has started its pool
        started = time.monotonic()
        demo.send_signal(signal.SIGINT)
        demo.wait(timeout=15)
        took = time.monotonic() - started
    finally:
        if demo.poll() is None:
            demo.kill()
    assert took < 10, f"stopping took {took:.1f} s"
    assert demo.returncode == 0 and "stopped the web server and the workers" in demo.stdout.read()
    assert all(not _group_members(pgid) for pgid in groups)


def _children(pid: int) -> list[str]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.read_text().split() if path.exists() else []
