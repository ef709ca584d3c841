"""A web worker's memory: one gunicorn worker with the production settings (bench/serve.py starts it) serves each
page a page benchmark timed, twice, as an admin; its peak resident memory (VmHWM) and its memory at the end."""
from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path

import requests

from bench.serve import _free_port, _gunicorn

PASSWORD = "bench-memory-password-1"  # noqa: S105 (a scratch database's bench user)


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _admin_session(base: str) -> requests.Session:
    import re

    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-memory-admin")
    user.is_superuser = user.is_staff = True
    user.set_password(PASSWORD)
    user.save()
    http = requests.Session()
    page = http.get(f"{base}/accounts/login/", timeout=60)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    done = http.post(f"{base}/accounts/login/", timeout=60, allow_redirects=False,
                     data={"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": token})
    if done.status_code != 302:
        raise SystemExit(f"web memory: the admin could not log in ({done.status_code})")
    return http


def web_worker_memory(urls: list[str]) -> dict:
    """Serve every url twice from one gunicorn worker; its peak and last resident memory in MB."""
    port = _free_port(8631)
    log = Path(tempfile.gettempdir()) / "taskgen-bench-memory-gunicorn.log"
    server = _gunicorn(port, 1, log, secret_key=secrets.token_urlsafe(50))
    try:
        base = f"http://127.0.0.1:{port}"
        http = _admin_session(base)
        worker = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
        started, count = time.perf_counter(), 0
        for url in urls * 2:
            response = http.get(f"{base}{url}", timeout=300)
            if response.status_code != 200:
                raise SystemExit(f"web memory: {url} answered {response.status_code}")
            count += 1
        return {"peak_mb": round(_status_kb(worker, "VmHWM") / 1024, 1),
                "rss_mb": round(_status_kb(worker, "VmRSS") / 1024, 1), "requests": count,
                "seconds": round(time.perf_counter() - started, 1), "target_mb": 300,
                "ok": _status_kb(worker, "VmHWM") / 1024 <= 300}
    finally:
        server.terminate()
        server.wait(timeout=30)
