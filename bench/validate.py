"""The validate page's server time at 10,000 and 100,000 episodes (target: at most 300 ms at 100,000 on PostgreSQL).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME .venv/bin/python bench/validate.py [--sizes 10000,100000]

Works in a throwaway test database (`test_NAME`, made and dropped here), filled with bulk inserts: 100 sites, one
verifier result per episode, two judge configs, final labels on a 2% sample and three reviewers' labels on 1%.
Prints the median of several requests per page variant, and the query count; asserts nothing.

How the page reads 100,000 episodes: on PostgreSQL from the summary (taskgen/stages/validate/summary.py), cells per
(run, judge config or pair of configs, site, kind, verdict, verifier result, final label) that triggers keep marked
and the page brings up to date before it reads; a few hundred rows summed in Python into every figure. Elsewhere (and
against one reviewer's labels) one grouped scan counts them. The judge-vs-reviewer table groups labels by (reviewer,
label, verdict). Figures printed with the load; the last line times the page right after 1,000 episodes' verdicts
changed (the page re-sums those episodes first).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from bench.cpu import backend_pid, cpu_seconds  # noqa: E402
from taskgen.models import Episode, FinalLabel, JudgeConfig, Judgment, Label, Run, Site, Task, VerifierResult  # noqa: E402  # noqa: E402

BATCH = 5000
SITES = 100


def _bulk(model, rows: list) -> list:
    return model.objects.bulk_create(rows, batch_size=BATCH)


def _fill(run: Run, configs: list[JudgeConfig], reviewers: list, start: int, count: int, rng: random.Random) -> None:
    """`count` more episodes of `run`, each with a verifier result, both configs' judgments and a few labels."""
    sites = list(Site.objects.order_by("id"))
    tasks = _bulk(Task, [Task(task_id=f"bench-{i:07d}", site=sites[i % SITES], instruction=f"bench task {i}",
                              task_kind="action" if i % 3 else "info") for i in range(start, start + count)])
    episodes = _bulk(Episode, [Episode(run=run, task=t, site=t.site, task_kind=t.task_kind, task_order=start + k,
                                       steps=5) for k, t in enumerate(tasks)])
    truth = {e.pk: rng.random() < 0.4 for e in episodes}
    _bulk(VerifierResult, [VerifierResult(episode=e, ok=truth[e.pk], source="results.jsonl") for e in episodes])
    for config, accuracy in zip(configs, (0.85, 0.7), strict=True):
        verdicts = ["SUCCESS" if (truth[e.pk] if rng.random() < accuracy else not truth[e.pk]) else "NOT SUCCESS"
                    for e in episodes]
        verdicts = ["NONE" if rng.random() < 0.01 else v for v in verdicts]
        _bulk(Judgment, [Judgment(episode=e, config=config, verdict=v, cost_usd="0.0012")
                         for e, v in zip(episodes, verdicts, strict=True)])
    sample = [e for e in episodes if rng.random() < 0.02]
    _bulk(FinalLabel, [FinalLabel(episode=e, verdict="SUCCESS" if truth[e.pk] else "NOT SUCCESS") for e in sample])
    _bulk(Label, [Label(episode=e, reviewer=r, verdict=rng.choice(["SUCCESS", "NOT SUCCESS"]))
                  for e in sample[: len(sample) // 2] for r in reviewers])


def _time_page(client: Client, query: dict, repeats: int) -> tuple[float, float, int, float]:
    """Median wall time, mean CPU time (ms) and query count of the page as it is read again and again, and the wall
    time of its first request (which may build the summary's cells for the run first)."""
    started = time.perf_counter()
    assert client.get("/validate/", query).status_code == 200  # noqa: S101 - a broken page is not a figure
    first = (time.perf_counter() - started) * 1000
    with CaptureQueriesContext(connection) as captured:
        client.get("/validate/", query)
    queries = len(captured)  # counted now: the next request clears the connection's query log
    pid = backend_pid(connection)
    times, cpu_start = [], cpu_seconds(pid)
    for _ in range(repeats):
        started = time.perf_counter()
        client.get("/validate/", query)
        times.append((time.perf_counter() - started) * 1000)
    cpu = (cpu_seconds(pid) - cpu_start) / repeats * 1000
    return statistics.median(times), cpu, queries, first


def _time_after_writes(client: Client, query: dict, config: JudgeConfig) -> None:
    """One page request right after 1,000 episodes' verdicts changed: it first re-sums those episodes."""
    changed = list(Judgment.objects.filter(config=config).order_by("?").values_list("pk", flat=True)[:1000])
    Judgment.objects.filter(pk__in=changed[::2]).update(verdict="SUCCESS")
    Judgment.objects.filter(pk__in=changed[1::2]).update(verdict="NOT SUCCESS")
    pid = backend_pid(connection)
    cpu_start, started = cpu_seconds(pid), time.perf_counter()
    client.get("/validate/", query)
    print(f"    {'after 1,000 verdicts changed':<26} {(time.perf_counter() - started) * 1000:8.1f} ms wall  "
          f"{(cpu_seconds(pid) - cpu_start) * 1000:7.1f} ms cpu  (one request; load {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    settings.ALLOWED_HOSTS = ["*"]
    vendor = connection.vendor
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        rng = random.Random(1)
        _bulk(Site, [Site(slug=f"bench-site-{i:03d}", name=f"Bench site {i}") for i in range(SITES)])
        run = Run.objects.create(name="bench-run")
        configs = [JudgeConfig.objects.create(provider="gemini", model="gemini-3.5-flash", prompt_version="v1"),
                   JudgeConfig.objects.create(provider="rules", model="rules-v1", prompt_version="v1")]
        user_model = get_user_model()
        reviewers = [user_model.objects.create(username=f"bench-reviewer-{i}") for i in range(3)]
        admin = user_model.objects.create(username="bench-admin", is_superuser=True, is_staff=True)
        client = Client()
        client.force_login(admin)
        have = 0
        if vendor == "postgresql":
            with connection.cursor() as cursor:  # every query's CPU in one backend process, where it is measured
                cursor.execute("SET max_parallel_workers_per_gather = 0")
        print(f"validate page server time on {vendor} (median of {args.repeats} requests; target <= 300 ms at 100,000"
              f" on PostgreSQL)")
        print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; other work inflates wall"
              " time, so cpu (this process + its database backend, parallel query off) is shown too")
        for size in (int(s) for s in args.sizes.split(",")):
            started = time.perf_counter()
            _fill(run, configs, reviewers, have, size - have, rng)
            have = size
            with connection.cursor() as cursor:
                if vendor == "postgresql":
                    cursor.execute("ANALYZE")
            print(f"  {size:>7,} episodes (filled in {time.perf_counter() - started:.1f} s)")
            base = {"runs": [run.pk], "config": configs[0].pk, "against": "verifier"}
            for label, query in (("one config vs verifiers", base),
                                 ("vs final human labels", {**base, "against": "human"}),
                                 ("two configs side by side", {**base, "compare": configs[1].pk})):
                ms, cpu, queries, first = _time_page(client, query, args.repeats)
                print(f"    {label:<26} {ms:8.1f} ms wall  {cpu:7.1f} ms cpu  {queries} queries"
                      f"  (load {os.getloadavg()[0]:.1f}; the first request {first:,.0f} ms)")
            _time_after_writes(client, base, configs[0])
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
