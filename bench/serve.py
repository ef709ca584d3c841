"""20 reviewers at once against gunicorn (3 workers) on PostgreSQL, over loopback HTTP, for 60 s: each takes the next
item of the false-positive audit queue, opens the episode and posts a label, again and again.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH_DB .venv/bin/python bench/serve.py \
        [--reviewers 20] [--seconds 60] [--workers 3] [--episodes 4000] [--port 8601]

Point DATABASE_URL at a scratch PostgreSQL database: the script migrates it, fills it once with a judged run (each
episode with 12 actions, 60 request-log lines, 12 data changes, 6 screenshots), makes the reviewers, and before each
run clears the labels it made last time. gunicorn runs with the production settings (DEBUG off, a real secret key,
the psycopg pool, JSON request logs to a file); HTTPS is the proxy's job, so it serves plain HTTP here
(DJANGO_HTTPS=0). Prints requests/s, p50/p95/max per endpoint, the error rate, PostgreSQL's busiest connection count
and the machine's load average beside them. Target: 0 errors, p95 under 300 ms on a 2-core machine.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
os.environ.setdefault("TASKGEN_MEDIA_ROOT", str(Path(tempfile.gettempdir()) / "taskgen-bench-serve-media"))

from bench.cpu import pid_cpu, scratch_database_ensure  # noqa: E402

RUN_NAME = "bench-serve"
PASSWORD = "bench-serve-password-1"  # noqa: S105 (a scratch database's bench users)
TARGET_P95_MS = 300


def _setup_django():
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--no-input", verbosity=0)


def _png(n: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1280, 800), (n * 40 % 256, 90, 160)).save(buf, "PNG")
    return buf.getvalue()


def _episode_fields(n: int) -> dict:
    return {"actions": [{"click": {"index": i}} for i in range(11)] + [{"done": {}}],
            "answer": f"The order {n} was placed for 2 mugs.",
            "request_log": [{"method": "POST" if i % 7 == 0 else "GET", "path": f"/sites/shop/page/{i}",
                             "query": {"q": str(i)}, "body": {"qty": "1"} if i % 7 == 0 else None, "status": 200}
                            for i in range(60)],
            "data_changes": [{"collection": "cart", "op": "update", "before": {"qty": i}, "after": {"qty": i + 1},
                              "changed": {"qty": i + 1}} for i in range(12)],
            "screen_text": [f"page {i} of the shop" for i in range(12)], "steps": 12}


def _fill(episodes: int, run_name: str = RUN_NAME):
    """The judged run (made once) and its false-positive audit queue."""
    from review.models import Queue
    from review.services import queues_builtin_ensure
    from taskgen.blobs import blob_store_image
    from taskgen.models import Episode, JudgeConfig, Judgment, Run, Screenshot, Site, Task

    run, made = Run.objects.get_or_create(name=run_name)
    if made or not run.episodes.exists():
        site, _ = Site.objects.get_or_create(slug="bench-shop", defaults={"name": "Bench shop"})
        tasks = Task.objects.bulk_create(
            Task(task_id=f"bench-serve-{n:05d}", site=site, instruction=f"Buy 2 mugs, order {n}", task_kind="action")
            for n in range(episodes))
        rows = Episode.objects.bulk_create(
            Episode(run=run, task=t, site=site, task_kind="action", task_order=n, **_episode_fields(n))
            for n, t in enumerate(tasks))
        config, _ = JudgeConfig.objects.get_or_create(provider="rules", model="bench", prompt_version="v1")
        parts = [{"part": "add 2 mugs", "done": True, "evidence": "request #7 POST /sites/shop/page/7"},
                 {"part": "place the order", "done": True, "evidence": "change #3"}]
        Judgment.objects.bulk_create(Judgment(episode=e, config=config, verdict="SUCCESS", parts=parts) for e in rows)
        blobs = [blob_store_image(data=_png(n)) for n in range(6)]
        Screenshot.objects.bulk_create(Screenshot(episode=e, step=s, name=f"step_{s}.png", blob=blobs[s])
                                       for e in rows for s in range(6))
        _analyze()
    queues_builtin_ensure()
    return Queue.objects.get(run=run, kind=Queue.Kind.FALSE_POSITIVE)


def _analyze() -> None:
    """Fresh planner statistics, as a live database has them: right after a bulk insert PostgreSQL thinks the tables
    are nearly empty, and the queue's query plan (a nested loop over every judgment) takes seconds instead of ms."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _reviewers(count: int) -> list[str]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    group, _ = Group.objects.get_or_create(name="reviewer")
    names = [f"bench-reviewer-{n:02d}" for n in range(count)]
    for name in names:
        user, made = get_user_model().objects.get_or_create(username=name)
        if made or not user.check_password(PASSWORD):
            user.set_password(PASSWORD)
            user.save()
        user.groups.add(group)
    return names


def _forget_last_run(queue) -> None:
    """Labels the bench made last time go, so every run starts on the same queue (a scratch database only)."""
    from review.models import Reservation
    from taskgen.models import FinalLabel, FinalLabelChange, Label, LabelChange

    scope = {"episode__run__name": RUN_NAME}
    LabelChange.objects.filter(label__episode__run__name=RUN_NAME).delete()
    for model in (Label, FinalLabelChange, FinalLabel):
        model.objects.filter(**scope).delete()
    Reservation.objects.filter(queue=queue).delete()


def _free_port(wanted: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", wanted))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gunicorn(port: int, workers: int, log: Path, secret_key: str = "") -> subprocess.Popen:
    """gunicorn with the production settings, in a process group of its own (so its workers can be killed with it);
    returns once it answers."""
    env = {**os.environ, "DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secret_key or secrets.token_urlsafe(50),
           "DJANGO_HTTPS": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "GUNICORN_BIND": f"127.0.0.1:{port}",
           "GUNICORN_WORKERS": str(workers), "TASKGEN_LOG_FORMAT": "json"}
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "taskgen.wsgi"],
                               cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    for _ in range(120):
        try:
            requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30)
            return process
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.5)
    raise SystemExit(f"gunicorn did not start: {log.read_text()[-2000:]}")


class Reviewer(threading.Thread):
    """One reviewer's browser: log in, then take next -> open the episode -> label, until the deadline."""

    def __init__(self, base: str, name: str, queue_pk: int, deadline: float, results: list, think: float) -> None:
        super().__init__(daemon=True)
        self.base, self.name, self.queue_pk, self.deadline, self.results = base, name, queue_pk, deadline, results
        self.think = think  # seconds spent reading the episode before labelling it
        self.http = requests.Session()

    def timed(self, endpoint: str, method: str, path: str, ok_status: int, **kwargs) -> requests.Response | None:
        started = time.perf_counter()
        try:
            response = self.http.request(method, f"{self.base}{path}", timeout=30, allow_redirects=False, **kwargs)
            ok = response.status_code == ok_status
        except requests.RequestException:
            response, ok = None, False
        self.results.append((endpoint, (time.perf_counter() - started) * 1000, ok))
        return response if ok else None

    def log_in(self) -> None:
        page = self.http.get(f"{self.base}/accounts/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        done = self.http.post(f"{self.base}/accounts/login/", timeout=30, allow_redirects=False,
                              data={"username": self.name, "password": PASSWORD, "csrfmiddlewaretoken": token})
        if done.status_code != 302:
            raise SystemExit(f"{self.name} could not log in: {done.status_code}")

    def run(self) -> None:
        csrf = {"X-CSRFToken": self.http.cookies["csrftoken"]}
        time.sleep(random.uniform(0, self.think))  # reviewers do not all start at the same instant
        while time.monotonic() < self.deadline:
            taken = self.timed("take next (POST)", "POST", f"/queues/{self.queue_pk}/next/", 302, headers=csrf)
            if taken is None or "/episodes/" not in taken.headers.get("Location", ""):
                time.sleep(0.2)
                continue
            url = taken.headers["Location"]
            if self.timed("episode page (GET)", "GET", url, 200) is None:
                continue
            episode = url.split("/episodes/")[1].split("/")[0]
            time.sleep(random.uniform(0.5, 1.5) * self.think)
            self.timed("label (POST, htmx)", "POST", f"/episodes/{episode}/label/?queue={self.queue_pk}", 200,
                       headers={**csrf, "HX-Request": "true"},
                       data={"verdict": random.choice(["SUCCESS", "NOT SUCCESS", "UNSURE"]), "note": "bench"})


def _watch_connections(stop: threading.Event, peak: list[int]) -> None:
    from django.db import connection

    while not stop.is_set():
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            peak[0] = max(peak[0], cursor.fetchone()[0])
        stop.wait(0.5)


def _server_cpu(master: int) -> dict[int, float]:
    """CPU seconds so far of each server process: gunicorn's master and workers, and the database's backends."""
    from django.db import connection

    children = Path(f"/proc/{master}/task/{master}/children")
    pids = [master, *map(int, children.read_text().split())] if children.exists() else [master]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
                       "pg_backend_pid()")
        pids += [row[0] for row in cursor.fetchall()]
    return {pid: pid_cpu(pid) for pid in pids}


def _cpu_per_request(before: dict[int, float], after: dict[int, float], requests_made: int) -> float:
    """Server CPU ms per request over the run (a backend that started during the run counts from zero)."""
    used = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    return used / max(1, requests_made) * 1000


def _report(results: list, seconds: float, peak_connections: int, load: tuple) -> None:
    by_endpoint = defaultdict(list)
    for endpoint, ms, ok in results:
        by_endpoint[endpoint].append((ms, ok))
    errors = sum(1 for _, _, ok in results if not ok)
    print(f"requests: {len(results)} in {seconds:.0f} s = {len(results) / seconds:.1f} req/s; "
          f"errors: {errors} ({100 * errors / max(1, len(results)):.2f}%); "
          f"PostgreSQL connections at most: {peak_connections}")
    print(f"{'endpoint':<22}{'count':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'errors':>8}")
    worst = 0.0
    for endpoint, rows in by_endpoint.items():
        times = sorted(ms for ms, _ in rows)
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        worst = max(worst, p95)
        print(f"{endpoint:<22}{len(rows):>7}{statistics.median(times):>9.0f}{p95:>9.0f}{times[-1]:>9.0f}"
              f"{sum(1 for _, ok in rows if not ok):>8}")
    print(f"load average before {load[0]:.2f}, after {load[1]:.2f} (1 min) on {os.cpu_count()} cores; "
          f"target: 0 errors, p95 < {TARGET_P95_MS} ms -> "
          f"{'met' if errors == 0 and worst < TARGET_P95_MS else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--port", type=int, default=8601)
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds a reviewer reads an episode before labelling it (0: back to back, which "
                             "measures the server saturated, not a reviewer's wait)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database")
    scratch_database_ensure(os.environ["DATABASE_URL"])
    _setup_django()
    queue = _fill(args.episodes)
    names = _reviewers(args.reviewers)
    _forget_last_run(queue)
    log = Path(tempfile.gettempdir()) / "taskgen-bench-serve-gunicorn.log"
    port = _free_port(args.port)
    server = _gunicorn(port, args.workers, log)
    try:
        results: list = []
        reviewers = [Reviewer(f"http://127.0.0.1:{port}", n, queue.pk, 0, results, args.think) for n in names]
        for reviewer in reviewers:
            reviewer.log_in()
        stop, peak = threading.Event(), [0]
        threading.Thread(target=_watch_connections, args=(stop, peak), daemon=True).start()
        cpu_before = _server_cpu(server.pid)
        load_before, started = os.getloadavg()[0], time.monotonic()
        for reviewer in reviewers:
            reviewer.deadline = started + args.seconds
            reviewer.start()
        for reviewer in reviewers:
            reviewer.join()
        stop.set()
        cpu = _cpu_per_request(cpu_before, _server_cpu(server.pid), len(results))
        print(f"bench/serve.py: {args.reviewers} reviewers, gunicorn {args.workers} workers x "
              f"{os.environ.get('GUNICORN_THREADS', '1')} threads, PostgreSQL, {args.episodes} episodes in the queue, "
              f"think time {args.think:g} s (server log: {log})")
        _report(results, time.monotonic() - started, peak[0], (load_before, os.getloadavg()[0]))
        cores = os.cpu_count() or 1
        print(f"server CPU per request (gunicorn + PostgreSQL backends): {cpu:.1f} ms; {cores} cores serve at most "
              f"{cores * 1000 / max(cpu, 0.1):.0f} requests/s")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
