"""Server time of the review pages on a full database: the queue page, the episode page, taking the next item of the
false-positive audit, a label post, and the run page (100,000 episodes in one run) as it opens, filtered, sorted
and searched.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH_DB .venv/bin/python bench/review_pages.py [--episodes N]
        [--run-page-only]

Point DATABASE_URL at a scratch PostgreSQL database: the script migrates it and fills it once with N episodes (100,000
by default; each with two step screens and a final one) through COPY, then reuses them on later runs. The episode it
opens has 30 screenshots, 300 request-log lines and 50 data changes. Times are measured in-process with Django's test
client (server time, no network) and printed as p50/p95 against the issues' targets (queue page 100 ms, episode page 80
ms, label post 50 ms, run page 150 ms), with the mean CPU of this process and its PostgreSQL backend, which a busy
machine inflates far less (a parallel query's worker processes are not counted). The queue page's progress counts load
after the page (htmx) and are timed on their own. Each label post is a fresh episode's first label by the timing user,
so repeated runs of the bench measure the same work.
"""
from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
os.environ.setdefault("TASKGEN_MEDIA_ROOT", str(Path(tempfile.gettempdir()) / "taskgen-bench-media"))

from bench.cpu import backend_pid, cpu_seconds, scratch_database_ensure  # noqa: E402

RUN_NAME = "bench-review-pages"
TARGETS_MS = {"queue page": 100, "episode page": 80, "label post": 50}
RUN_PAGE_TARGET_MS = 150
TAKE_NEXT_TARGET_MS = 50  # no target in the issues: a post like the label's
PROGRESS_TARGET_MS = 150  # no target in the issues: the queue page loads it after it shows (htmx), like the list
RUN_PAGE_VIEWS = {  # what a researcher triaging the run asks for
    "run page": {},
    "run page: SUCCESS + verifier fail": {"verdicts": "SUCCESS", "verifier": "fail"},
    "run page: sort by verdict": {"sort": "-verdict"},
    "run page: sort by agreement": {"sort": "agreement"},
    "run page: sort by instruction": {"sort": "instruction"},
    "run page: sort by screens": {"sort": "-screens"},
    "run page: sort by flags": {"sort": "flags"},
    "run page: disagree, by site": {"disagree": "1", "sort": "site"},
    "run page: unlabelled action": {"label_state": "unlabelled", "task_kind": "action", "sort": "-final"},
    "run page: search": {"search": "item 4242"},
    "run page: page 500": {"page": "500"},
}


def _copy(model, objects) -> None:
    """Insert model instances with PostgreSQL COPY (about ten times faster than bulk_create at this size)."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy:
        for obj in objects:
            copy.write_row([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])


def _png(n: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1280, 800), (n * 8 % 256, 90, 160)).save(buf, "PNG")
    return buf.getvalue()


def _heavy_evidence() -> dict:
    log = [{"method": "POST" if n % 10 == 0 else "GET", "path": f"/sites/shop/items/{n}" if n % 7 else "/static/a.css",
            "query": {"q": f"lamp {n}", "page": n % 5}, "body": {"qty": n, "csrf_token": "t"} if n % 10 == 0 else None,
            "status": 200} for n in range(300)]
    changes = [{"collection": "cart_items", "op": "update", "before": {"id": n, "qty": 1, "name": f"item {n}"},
                "after": {"id": n, "qty": 2, "name": f"item {n}"}} for n in range(50)]
    actions = [{"click": {"index": n}} for n in range(30)]
    return {"request_log": log, "data_changes": changes, "actions": actions, "steps": 30,
            "answer": "The cart now holds two of each item.", "screen_text": ["home", "Cart: 50 items"]}


def _user(username: str):
    from django.contrib.auth.models import Group, User

    user, _ = User.objects.get_or_create(username=username)
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    return user


def _fill(n_episodes: int) -> None:
    from django.db import connection, transaction

    from review.models import FinalLabel, Label
    from taskgen.models import Episode, JudgeConfig, Judgment, Run, Site, Task, VerifierResult
    rng = random.Random(7)
    started = time.perf_counter()
    with transaction.atomic():
        run = Run.objects.create(name=RUN_NAME)
        sites = Site.objects.bulk_create(
            [Site(slug=f"bench-site-{n}", name=f"Bench site {n}") for n in range(50)], ignore_conflicts=True)
        sites = list(Site.objects.filter(slug__startswith="bench-site-"))
        _copy(Task, (Task(task_id=f"bench-{n:07d}", site=sites[n % 50], instruction=f"Add item {n} to the cart",
                          task_kind="action" if n % 3 else "info") for n in range(n_episodes)))
        tasks = dict(Task.objects.filter(task_id__startswith="bench-").values_list("task_id", "id"))
        small = {"actions": [{"click": {"index": 1}}, {"answer": {"text": "ok"}}], "answer": "ok", "steps": 2,
                 "request_log": [{"method": "GET", "path": "/sites/shop/", "status": 200}]}
        _copy(Episode, (Episode(run=run, task_id=tasks[f"bench-{n:07d}"], site=sites[n % 50],
                                task_kind="action" if n % 3 else "info", task_order=n, **small)
                        for n in range(n_episodes)))
        ids = list(Episode.objects.filter(run=run).order_by("id").values_list("id", flat=True))
        config = JudgeConfig.objects.get_or_create(provider="rules", model="rules-v1", prompt_version="v1")[0]
        parts = [{"part": "add the item", "done": True, "evidence": "POST /sites/shop/items/10; cart_items update"}]
        verdicts = ["SUCCESS"] * 5 + ["NOT SUCCESS"] * 4 + ["NONE"]
        _copy(Judgment, (Judgment(episode_id=i, config=config, verdict=rng.choice(verdicts), parts=parts,
                                  inconsistent=rng.random() < 0.03, unsupported_citations=int(rng.random() < 0.02))
                         for i in ids))
        _copy(VerifierResult, (VerifierResult(episode_id=i, ok=rng.random() < 0.5, source="results.jsonl")
                               for i in ids[::3]))
        reviewers = [_user(f"bench-reviewer-{n}") for n in range(5)]
        labelled = [(i, rng.choice(verdicts[:-1])) for i in ids[1:20000:2]]
        _copy(Label, (Label(episode_id=i, reviewer=reviewers[n % 5], verdict=v) for n, (i, v) in enumerate(labelled)))
        _copy(FinalLabel, (FinalLabel(episode_id=i, verdict=v) for i, v in labelled))
    with connection.cursor() as cursor:  # outside the transaction: VACUUM cannot run inside one
        # what autovacuum does soon after a bulk load: statistics for the planner, and the visibility map that lets
        # a count read the index alone
        cursor.execute("VACUUM ANALYZE")
    print(f"filled {n_episodes:,} episodes in {time.perf_counter() - started:.1f} s", flush=True)


def _vacuum() -> None:
    """What autovacuum does between runs on a PostgreSQL server with its defaults (it is off on this machine): the
    label posts and reservations of earlier runs leave dead rows and stale statistics that slow every page."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def _screens_fill(run) -> None:
    """Screens for every episode of the run (two steps and the final screen, one image shared), made once: the run
    page counts and sorts them."""
    from django.db import transaction

    from taskgen.blobs import blob_store_image
    from taskgen.models import Screenshot

    ids = list(run.episodes.filter(screenshots__isnull=True).order_by("id").values_list("id", flat=True))
    if not ids:
        return
    started, blob = time.perf_counter(), blob_store_image(data=_png(1))
    with transaction.atomic():
        _copy(Screenshot, (Screenshot(episode_id=i, kind=kind, step=step, name=name, blob=blob) for i in ids
                           for kind, step, name in (("step", 1, "step_1.png"), ("step", 2, "step_2.png"),
                                                    ("final", 2, "final.png"))))
        run.episodes.filter(pk__in=ids).update(screens=3)  # as the import counts them
    _vacuum()
    print(f"filled {3 * len(ids):,} screenshots in {time.perf_counter() - started:.1f} s", flush=True)


def _heavy_episode():
    """The episode the bench opens: 30 screenshots, 300 log lines, 50 changes (made once, then reused)."""
    from taskgen.blobs import blob_store_image
    from taskgen.models import Episode, Screenshot

    episode = Episode.objects.filter(run__name=RUN_NAME).order_by("id").first()
    if not Screenshot.objects.filter(episode=episode).exists():
        Episode.objects.filter(pk=episode.pk).update(**_heavy_evidence())
        for n in range(30):
            blob = blob_store_image(data=_png(n))
            Screenshot.objects.create(episode=episode, step=n, name=f"step_{n}.png", blob=blob)
    return episode


def _time(label: str, call, repeat: int, target_ms: int | None = None) -> None:
    from django.db import connection

    call()  # warm up: template compilation and connection setup are not what a reviewer waits for
    times, pid = [], backend_pid(connection)
    cpu_start = cpu_seconds(pid)
    for _ in range(repeat):
        started = time.perf_counter()
        response = call()
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code in (200, 302), f"{label}: HTTP {response.status_code}"
    cpu = (cpu_seconds(pid) - cpu_start) / repeat * 1000
    p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1]
    target = target_ms or TARGETS_MS[label]
    verdict = "ok" if p95 <= target else "OVER TARGET"
    print(f"{label:36s} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   cpu {cpu:6.1f} ms   target p95 <= {target} ms  "
          f"{verdict}  (load {os.getloadavg()[0]:.1f})", flush=True)


def _label_posts(run, timer, queue, count: int):
    """`count` label posts, each the timer's first label on an episode it never labelled before: every run of the
    bench posts on fresh episodes, so an episode's label history (and the post's cost) does not grow run after run.
    Half of them go to episodes another reviewer labelled already (the final label then changes or disagrees)."""
    from django.urls import reverse

    from taskgen.models import Episode

    fresh = Episode.objects.filter(run=run).exclude(labels__reviewer=timer).order_by("id").values_list("pk", flat=True)
    ids = list(fresh[:count])
    if len(ids) < count:
        raise SystemExit("label post: no fresh episodes left; drop the bench database and fill it again")
    for n, pk in enumerate(ids):
        yield reverse("review:label_post", args=[pk]), {"verdict": ("SUCCESS", "NOT SUCCESS")[n % 2], "queue": queue.pk}


def _take_next(client, queue, timer):
    """Reserve the audit's next item (the timer's reservation from the last call given back first, so every call
    claims one, riskiest first; that delete, about a millisecond, is timed with it)."""
    from django.urls import reverse

    from review.models import Reservation

    Reservation.objects.filter(queue=queue, reviewer=timer).delete()
    return client.post(reverse("review:queue_next", args=[queue.pk]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--run-page-only", action="store_true", help="time the run page's views only")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("review_pages: skipped - set DATABASE_URL to a scratch PostgreSQL database to run it")
        return 0
    scratch_database_ensure(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from review.models import Queue
    from review.services import queues_builtin_ensure
    from taskgen.models import Run

    call_command("migrate", verbosity=0)
    if not Run.objects.filter(name=RUN_NAME).exists():
        _fill(args.episodes)
    episode = _heavy_episode()
    queues_builtin_ensure()
    run = Run.objects.get(name=RUN_NAME)
    _screens_fill(run)
    _vacuum()
    queue = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run)
    client, timer = Client(), _user("bench-timer")
    client.force_login(timer)
    print(f"{run.episodes.count():,} episodes; queue '{queue.name}'; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (times are wall clock: a busy machine "
          f"inflates them)")
    if not args.run_page_only:
        _time("queue page", lambda: client.get(queue.get_absolute_url()), args.repeat)
        _time("episode page", lambda: client.get(f"{episode.get_absolute_url()}?queue={queue.pk}"), args.repeat)
        _time("queue page: progress", lambda: client.get(reverse("review:queue_progress", args=[queue.pk])),
              args.repeat, PROGRESS_TARGET_MS)
        _time("take next", lambda: _take_next(client, queue, timer), args.repeat, TAKE_NEXT_TARGET_MS)
        posts = _label_posts(run, timer, queue, args.repeat + 1)
        _time("label post", lambda: client.post(*next(posts), HTTP_HX_REQUEST="true"), args.repeat)
    for label, query in RUN_PAGE_VIEWS.items():
        _time(label, lambda q=query: client.get(run.get_absolute_url(), q), args.repeat, RUN_PAGE_TARGET_MS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
