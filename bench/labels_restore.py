"""A large labels restore through the web (issue 24: a 60 MB upload answered 500 after 60 s, when gunicorn killed
the worker that ran the whole file inside the request).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH .venv/bin/python bench/labels_restore.py [--mb 60]
        [--workers 2]

Fills the scratch database with enough episodes (a run `bench-labels`, 20 reviewers) for a backup of --mb
megabytes (two labels, three history entries, a final label and two of its history entries per episode), posts
the file to Exports -> Restore labels as an admin (Django's test client, the real view and upload handling), then
works the restore on the engine in --workers threads of this process, and restores the same file again (every
line already there). Prints the upload's time, the restore's time and lines per second, and the load; asserts
nothing. A missing scratch database is made.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

import taskgen.engine.send as engine_send  # noqa: E402
from bench.cpu import scratch_database_ensure  # noqa: E402
from taskgen.engine.wait import run_wait  # noqa: E402
from taskgen.models import Episode, FinalLabel, FinalLabelChange, Label, LabelChange, PipelineRun, Run, Site, Task  # noqa: E402  # noqa: E402
from tests.factories import UserFactory  # noqa: E402

RUN = "bench-labels"
REVIEWERS = 20
WHEN = "2026-06-01T12:00:00+00:00"
NOTE = "The cart shows the mug at 12 dollars and the order page confirms it; the judge cited both correctly. "


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def _episode_lines(task_id: str, n: int) -> list[str]:
    a, b = f"bench-r{n % REVIEWERS:02d}", f"bench-r{(n + 1) % REVIEWERS:02d}"
    label = {"verdict": "SUCCESS", "part_overrides": [1], "note": NOTE, "tags": ["price", "cart"]}
    first = {**label, "verdict": "UNSURE"}
    final = {"verdict": "SUCCESS", "adjudicated": False, "reason": "", "decided_by": None}
    key = {"run": RUN, "task_id": task_id}
    rows = [
        {"kind": "label", **key, "reviewer": a, **label, "created_at": WHEN, "updated_at": WHEN},
        {"kind": "label", **key, "reviewer": b, **label, "created_at": WHEN, "updated_at": WHEN},
        {"kind": "label_change", **key, "reviewer": a, "changed_by": a, "before": None, "after": first,
         "changed_at": "2026-06-01T11:00:00+00:00"},
        {"kind": "label_change", **key, "reviewer": a, "changed_by": a, "before": first, "after": label,
         "changed_at": WHEN},
        {"kind": "label_change", **key, "reviewer": b, "changed_by": b, "before": None, "after": label,
         "changed_at": WHEN},
        {"kind": "final_label", **key, "verdict": "SUCCESS", "reason": "", "adjudicated": False,
         "decided_by": None, "decided_at": WHEN},
        {"kind": "final_label_change", **key, "changed_by": a, "before": None, "after": {**final, "verdict": "UNSURE"},
         "changed_at": "2026-06-01T11:00:00+00:00"},
        {"kind": "final_label_change", **key, "changed_by": b, "before": {**final, "verdict": "UNSURE"},
         "after": final, "changed_at": WHEN},
    ]
    return [json.dumps(row, sort_keys=True) + "\n" for row in rows]


def _fill(megabytes: float) -> bytes:
    """The episodes (made once) and the backup of their labels, of about `megabytes`."""
    per_episode = len("".join(_episode_lines("bench-task-0000000", 0)).encode())
    count = int(megabytes * 1_000_000 / per_episode) + 1
    for model in (LabelChange, Label, FinalLabelChange, FinalLabel):
        model.objects.filter(**{("label__" if model is LabelChange else "") + "episode__run__name": RUN}).delete()
    for n in range(REVIEWERS):
        if not UserFactory._meta.model.objects.filter(username=f"bench-r{n:02d}").exists():
            UserFactory(username=f"bench-r{n:02d}", role="reviewer")
    run, _ = Run.objects.get_or_create(name=RUN)
    have = run.episodes.count()
    if have < count:
        site, _ = Site.objects.get_or_create(slug="bench-labels-site", defaults={"name": "bench"})
        tasks = Task.objects.bulk_create(
            [Task(task_id=f"bench-task-{n:07d}", site=site, instruction="Find the mug's price")
             for n in range(have, count)], batch_size=2000)
        Episode.objects.bulk_create([Episode(run=run, task=t, site=site, task_order=n) for n, t in enumerate(
            tasks, have)], batch_size=2000)
    ids = Task.objects.filter(episodes__run=run).order_by("task_id").values_list("task_id", flat=True)[:count]
    return b"".join(line.encode() for n, task_id in enumerate(ids) for line in _episode_lines(task_id, n))


def _restore(client: Client, data: bytes, workers: int, name: str) -> None:
    upload = io.BytesIO(data)
    upload.name = f"{name}.jsonl"
    started = time.perf_counter()
    response = client.post(reverse("review:labels_upload"), {"file": upload})
    posted = time.perf_counter() - started
    pipeline_run = PipelineRun.objects.filter(stage="labels").order_by("-pk").first()
    print(f"  {name}: the upload answered {response.status_code} in {posted:.2f} s "
          f"(run #{pipeline_run.pk} {pipeline_run.status}, {pipeline_run.total} units; {_load()})", flush=True)
    started = time.perf_counter()
    waited = run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=workers, stall_seconds=1800)
    took = time.perf_counter() - started
    result, lines = waited.pipeline_run.result, waited.pipeline_run.params["lines"]
    print(f"  {name}: restored on the engine ({workers} worker threads) in {took:.1f} s, {lines / took:,.0f} lines/s; "
          f"added {sum(result['added'].values()):,}, already there {sum(result['already_there'].values()):,}, "
          f"refused {result['refused']:,}; {waited.pipeline_run.status} ({_load()})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        scratch_database_ensure(os.environ["DATABASE_URL"])
    call_command("migrate", verbosity=0)
    engine_send.dispatch = lambda *a, **k: True  # this process works the units; no Celery worker is sent
    data = _fill(args.mb)
    lines = data.count(b"\n")
    print(f"backup: {len(data) / 1e6:.1f} MB, {lines:,} lines ({_load()})", flush=True)
    admin = UserFactory._meta.model.objects.filter(username="bench-admin").first() or UserFactory(
        username="bench-admin", role="admin")
    client = Client()
    client.force_login(admin)
    _restore(client, data, args.workers, "first restore")
    _restore(client, data, args.workers, "the same file again")


if __name__ == "__main__":
    main()
