"""Server time of the review pages on a full database: the queue page, the episode page, taking the next item of the
false-positive audit, a label post, the run page (N episodes in one run) as it opens, filtered, sorted by every column
it offers and searched, the validate page, a certify call, and a web worker's memory after serving them all.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH_DB .venv/bin/python bench/review_pages.py \
        [--episodes N] [--repeat 40] [--run-page-repeat 20] [--run-page-only] [--only WORDS] [--no-memory] [--json]

Point DATABASE_URL at a scratch PostgreSQL database: the script migrates it and fills it once with N episodes (100,000
by default; bench/review_fill.py says what each holds) through COPY, then reuses them on later runs (a database
filled with another N is refused: use another scratch database). Times are measured in-process with Django's test
client (server time, no network) and printed as p50/p95 against the issues' targets (issue 26 at a million episodes:
queue page 100 ms, episode page 80 ms, label post 50 ms, run page filtered and sorted 150 ms, validate 1 s, a certify
call 300 ms, a web worker 300 MB), with the mean CPU of this process and its PostgreSQL backend, which a busy machine
inflates far less (parallel query off, so a query's CPU is all in that backend). The queue page's progress counts
load after the page (htmx) and are timed on their own; they and taking the next item have no target issued, and their
figures say so (`target_ms` and `ok` null). Each label post is a fresh episode's first label by the
timing user, so repeated runs of the bench measure the same work. The certify call is `certificate_compute` as
`taskgen certify RUN` makes it. Before the first page the process settles as a web worker does at its start
(taskgen/web_worker.py: the objects alive then frozen out of the garbage collector's sight). The web worker is one
gunicorn worker with the production settings serving each page the bench timed (bench/web_memory.py): its peak
resident memory. `--json` prints every figure as one JSON object.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
os.environ.setdefault("TASKGEN_MEDIA_ROOT", str(Path(tempfile.gettempdir()) / "taskgen-bench-media"))

from bench.cpu import backend_pid, cpu_seconds, scratch_database_ensure  # noqa: E402
from bench.review_fill import RUN_NAME, fill, heavy_episode, user_reviewer, vacuum  # noqa: E402

# Issue 26's targets (p95 wall). "take next", "queue page: progress" and "judge: episodes left" (what starting
# `taskgen judge RUN` asks first: the run's episodes with no verdict yet) are measured beside them with no target
# issued: their figures carry none (target_ms and ok null), rather than a made-up one.
TARGETS_MS: dict[str, int | None] = {"queue page": 100, "episode page": 80, "label post": 50, "run page": 150,
                                     "validate": 1000, "certify call": 300, "take next": None,
                                     "queue page: progress": None, "judge: episodes left": None}
MEMORY_TARGET_MB = 300
# The fewest timings a p95 is read from: of 5 (what validate and the certify call had, a quarter of --repeat), the
# p95 is nearly the slowest, which on average sits near the 83rd percentile and swings with one slow call.
P95_SAMPLES_LEAST = 20
FIGURES: dict[str, dict] = {}


def run_page_views(sorts) -> dict[str, dict]:
    """What a researcher triaging the run asks for: the page as it opens, searched, far on, filtered, and sorted by
    every column it offers both ways, alone and with the judge's successes filtered."""
    views = {"run page": {}, "run page: search": {"search": "item 4242"}, "run page: page 500": {"page": "500"},
             "run page: SUCCESS + verifier fail": {"verdicts": "SUCCESS", "verifier": "fail"},
             "run page: disagree, by site": {"disagree": "1", "sort": "site"},
             "run page: unlabelled action, by final": {"label_state": "unlabelled", "task_kind": "action",
                                                       "sort": "-final"}}
    for key in sorts:
        views[f"run page: sort by {key}"] = {"sort": key}
        views[f"run page: sort by -{key}"] = {"sort": f"-{key}"}
        views[f"run page: SUCCESS, sort by {key}"] = {"verdicts": "SUCCESS", "sort": key}
    return views


def _time(label: str, call, repeat: int, target: str) -> None:
    from django.db import connection

    call()  # warm up: template compilation and connection setup are not what a reviewer waits for
    times, pid = [], backend_pid(connection)
    cpu_start = cpu_seconds(pid)
    for _ in range(repeat):
        started = time.perf_counter()
        response = call()
        times.append((time.perf_counter() - started) * 1000)
        status = getattr(response, "status_code", 200)
        assert status in (200, 302), f"{label}: HTTP {status}"  # noqa: S101 - a broken page is not a figure
    cpu = (cpu_seconds(pid) - cpu_start) / repeat * 1000
    # one time has no spread: its p95 is itself (a quick --repeat 1 run, to fill the database, prints it)
    p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
    limit = TARGETS_MS[target]
    load = os.getloadavg()[0]
    ok, cpu_ok = (None, None) if limit is None else (p95 <= limit, cpu <= limit)
    FIGURES[label] = {"p50_ms": round(p50, 1), "p95_ms": round(p95, 1), "cpu_ms": round(cpu, 1), "target_ms": limit,
                      "ok": ok, "cpu_ok": cpu_ok, "repeat": repeat, "load": round(load, 1)}
    verdict = "no target issued" if limit is None else \
        f"target p95 <= {limit} ms  {'ok' if ok else 'OVER TARGET'}"
    print(f"{label:44s} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   cpu {cpu:7.1f} ms   {verdict}  (load {load:.1f})",
          flush=True)


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


def _review_pages(client, run, queue, timer, episode, repeat: int) -> list[str]:
    from django.urls import reverse

    _time("queue page", lambda: client.get(queue.get_absolute_url()), repeat, "queue page")
    _time("episode page", lambda: client.get(f"{episode.get_absolute_url()}?queue={queue.pk}"), repeat,
          "episode page")
    _time("queue page: progress", lambda: client.get(reverse("review:queue_progress", args=[queue.pk])), repeat,
          "queue page: progress")
    _time("take next", lambda: _take_next(client, queue, timer), repeat, "take next")
    posts = _label_posts(run, timer, queue, repeat + 1)
    _time("label post", lambda: client.post(*next(posts), HTTP_HX_REQUEST="true"), repeat, "label post")
    return [queue.get_absolute_url(), f"{episode.get_absolute_url()}?queue={queue.pk}",
            reverse("review:queue_progress", args=[queue.pk])]


def _validate_certify_and_left_to_judge(client, run, repeat: int) -> list[str]:
    from django.urls import reverse
    from django.utils.http import urlencode

    from taskgen.models import JudgeConfig
    from taskgen.stages.certify.service import CertifyParams, certificate_compute
    from taskgen.stages.judge.service import episodes_to_judge
    from taskgen.stages.validate.summary import summary_and_risks_refresh

    config = JudgeConfig.objects.get(provider="rules", model="rules-v1", prompt_version="v1")
    started = time.perf_counter()
    summary_and_risks_refresh()  # what beat does after a bulk load, so the page reads an up-to-date summary
    vacuum()  # and autovacuum soon after (off on this machine): the summary's new rows' statistics
    print(f"validate summary and kept risks brought up to date in {time.perf_counter() - started:.1f} s", flush=True)
    urls = []
    for label, against in (("validate: vs verifiers", "verifier"), ("validate: vs final labels", "human")):
        url = f"{reverse('review:validate')}?{urlencode({'runs': run.pk, 'config': config.pk, 'against': against})}"
        _time(label, lambda u=url: client.get(u), max(P95_SAMPLES_LEAST, repeat), "validate")
        urls.append(url)
    params = CertifyParams(run=run, judge_config=config)
    _time("certify call", lambda: certificate_compute(params=params), max(P95_SAMPLES_LEAST, repeat), "certify call")
    _time("judge: episodes left", lambda: episodes_to_judge(run=run, config=config), P95_SAMPLES_LEAST,
          "judge: episodes left")
    panel = f"{reverse('review:certificate_panel')}?{urlencode({'run': run.pk, 'judge_config': config.pk})}"
    return [*urls, panel]


def _prepare(args):
    from django.core.management import call_command

    from review.models import Queue
    from review.services import queues_builtin_ensure
    from taskgen.models import Run

    call_command("migrate", verbosity=0)
    run = Run.objects.filter(name=RUN_NAME).first()
    if run is None:
        fill(args.episodes)
        run = Run.objects.get(name=RUN_NAME)
    elif (have := run.episodes.count()) != args.episodes:
        raise SystemExit(f"this database holds {have:,} episodes, not {args.episodes:,}: use another scratch database")
    episode = heavy_episode()
    queues_builtin_ensure()
    vacuum()
    return run, Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run), episode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--run-page-repeat", type=int, default=20)
    parser.add_argument("--run-page-only", action="store_true", help="time the run page's views only")
    parser.add_argument("--only", default="", help="time only the run page views whose name holds this")
    parser.add_argument("--no-memory", action="store_true", help="leave out the web worker's memory")
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object at the end")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("review_pages: skipped - set DATABASE_URL to a scratch PostgreSQL database to run it")
        return 0
    scratch_database_ensure(os.environ["DATABASE_URL"])
    import django

    django.setup()
    logging.getLogger("taskgen.request").setLevel(logging.WARNING)  # a line per request drowns the figures
    from django.db import connection
    from django.test import Client
    from django.utils.http import urlencode

    from review.run_table import SORTS
    from taskgen.web_worker import web_worker_settle

    run, queue, episode = _prepare(args)
    web_worker_settle()  # as a gunicorn worker does once the app is loaded (taskgen/wsgi.py): its objects frozen
    with connection.cursor() as cursor:  # every query's CPU in the one backend process where it is measured
        cursor.execute("SET max_parallel_workers_per_gather = 0")
    client, timer = Client(), user_reviewer("bench-timer")
    client.force_login(timer)
    print(f"{run.episodes.count():,} episodes; queue '{queue.name}'; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores (times are wall clock: a busy machine inflates them; cpu much less)", flush=True)
    urls = []
    if not args.run_page_only:
        urls += _review_pages(client, run, queue, timer, episode, args.repeat)
    for label, query in run_page_views(SORTS).items():
        if args.only in label:
            _time(label, lambda q=query: client.get(run.get_absolute_url(), q), args.run_page_repeat, "run page")
            urls.append(f"{run.get_absolute_url()}?{urlencode(query)}")
    if not args.run_page_only:
        urls += _validate_certify_and_left_to_judge(client, run, args.repeat)
    if not args.no_memory:
        from bench.web_memory import web_worker_memory

        FIGURES["web worker memory"] = memory = web_worker_memory(urls)
        print(f"{'web worker memory (gunicorn, 1 worker)':44s} peak {memory['peak_mb']:.0f} MB after "
              f"{memory['requests']} requests, {memory['rss_mb']:.0f} MB at the end; target <= {MEMORY_TARGET_MB} MB  "
              f"{'ok' if memory['peak_mb'] <= MEMORY_TARGET_MB else 'OVER TARGET'}", flush=True)
    if args.json:
        print(json.dumps({"episodes": args.episodes, "figures": FIGURES}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
