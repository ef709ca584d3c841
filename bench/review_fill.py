"""The page benchmarks' run (bench/review_pages.py): N episodes in one run, written with PostgreSQL COPY.

Each episode has a task on one of 50 sites, 1-9 steps with as many training rows (so the export's 27,644-step budget
picks a few thousand), three screens (two steps and the final one, one image shared), how it ended, and a verdict of
one judge config (50% SUCCESS, 40% NOT SUCCESS, 10% none; 3% inconsistent, 2% citing nothing); a third have a
verifier result; 2% (at least 10,000) are labelled by one of five reviewers, with their final label. The episode the
benchmark opens has 30 screenshots, 300 request-log lines and 50 data changes.
"""
from __future__ import annotations

import io
import random
import time

from bench.copy_fill import copy_rows

RUN_NAME = "bench-review-pages"
SITES = 50
ENDINGS = (("answered", "the agent answered"), ("step_limit", "the step limit (20) was reached"),
           ("bad_element", "element 12 is not on the page"), ("", ""))


def png(n: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1280, 800), (n * 8 % 256, 90, 160)).save(buf, "PNG")
    return buf.getvalue()


def user_reviewer(username: str):
    from django.contrib.auth.models import Group, User

    user, _ = User.objects.get_or_create(username=username)
    user.groups.add(Group.objects.get_or_create(name="reviewer")[0])
    return user


def _ids(model, **where) -> list[int]:
    return list(model.objects.filter(**where).order_by("id").values_list("id", flat=True))


def _episodes(run_id: int, tasks: list[int], sites: list[int]):
    small = {"actions": [{"click": {"index": 1}}, {"answer": {"text": "ok"}}], "answer": "ok",
             "request_log": [{"method": "GET", "path": "/sites/shop/", "status": 200}]}
    for n, task in enumerate(tasks):
        steps = 1 + n % 9
        finished, reason = ENDINGS[n % len(ENDINGS)]
        yield (run_id, task, sites[n % SITES], "action" if n % 3 else "info", n, steps, steps, True, 3,
               finished, reason, steps if finished else None, small["actions"], small["answer"], small["request_log"])


def fill(n_episodes: int) -> None:
    """The run, made once in one transaction, then VACUUM ANALYZE (what autovacuum does soon after a bulk load)."""
    from django.db import transaction

    from taskgen.blobs import blob_store_image
    from taskgen.models import (
        Episode,
        FinalLabel,
        JudgeConfig,
        Judgment,
        Label,
        Run,
        Screenshot,
        Site,
        Task,
        VerifierResult,
    )

    rng, started, step = random.Random(7), time.perf_counter(), time.perf_counter()

    def said(what: str, count: int) -> None:
        nonlocal step
        print(f"  {what}: {count:,} rows in {time.perf_counter() - step:.1f} s", flush=True)
        step = time.perf_counter()

    with transaction.atomic():
        run = Run.objects.create(name=RUN_NAME)
        Site.objects.bulk_create([Site(slug=f"bench-site-{n}", name=f"Bench site {n}") for n in range(SITES)],
                                 ignore_conflicts=True)
        sites = [Site.objects.get(slug=f"bench-site-{n}").pk for n in range(SITES)]
        said("tasks", copy_rows(Task, ["task_id", "site_id", "instruction", "task_kind"],
                                ((f"bench-{n:07d}", sites[n % SITES], f"Add item {n} to the cart",
                                  "action" if n % 3 else "info") for n in range(n_episodes))))
        tasks = _ids(Task, task_id__startswith="bench-")
        said("episodes", copy_rows(
            Episode, ["run_id", "task_id", "site_id", "task_kind", "task_order", "steps", "row_count", "has_rows",
                      "screens", "finished", "end_reason", "end_step", "actions", "answer", "request_log"],
            _episodes(run.pk, tasks, sites)))
        ids = _ids(Episode, run=run)
        config = JudgeConfig.objects.get_or_create(provider="rules", model="rules-v1", prompt_version="v1")[0]
        parts = [{"part": "add the item", "done": True, "evidence": "POST /sites/shop/items/10; cart_items update"}]
        verdicts = ["SUCCESS"] * 5 + ["NOT SUCCESS"] * 4 + ["NONE"]
        said("judgments", copy_rows(
            Judgment, ["episode_id", "config_id", "verdict", "parts", "inconsistent", "unsupported_citations"],
            ((i, config.pk, rng.choice(verdicts), parts, rng.random() < 0.03, int(rng.random() < 0.02))
             for i in ids)))
        said("verifier results", copy_rows(VerifierResult, ["episode_id", "ok", "source"],
                                           ((i, rng.random() < 0.5, "results.jsonl") for i in ids[::3])))
        reviewers = [user_reviewer(f"bench-reviewer-{n}").pk for n in range(5)]
        labelled = [(i, rng.choice(verdicts[:-1])) for i in ids[1:2 * max(10_000, n_episodes // 50):2]]
        said("labels", copy_rows(Label, ["episode_id", "reviewer_id", "verdict"],
                                 ((i, reviewers[n % 5], v) for n, (i, v) in enumerate(labelled))))
        said("final labels", copy_rows(FinalLabel, ["episode_id", "verdict"], labelled))
        blob = blob_store_image(data=png(1)).pk
        said("screenshots", copy_rows(Screenshot, ["episode_id", "kind", "step", "name", "blob_id"],
                                      ((i, kind, s, name, blob) for i in ids
                                       for kind, s, name in (("step", 1, "step_1.png"), ("step", 2, "step_2.png"),
                                                             ("final", 2, "final.png")))))
    vacuum()
    said("VACUUM ANALYZE", 0)
    print(f"filled {n_episodes:,} episodes in {time.perf_counter() - started:.1f} s", flush=True)


def vacuum() -> None:
    """What autovacuum does between runs on a PostgreSQL server with its defaults (it is off on this machine): the
    label posts and reservations of earlier runs leave dead rows and stale statistics that slow every page."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def heavy_episode():
    """The episode the bench opens: 30 screenshots, 300 log lines, 50 changes (made once, then reused)."""
    from taskgen.blobs import blob_store_image
    from taskgen.models import Episode, Screenshot

    episode = Episode.objects.filter(run__name=RUN_NAME).order_by("id").first()
    if not Screenshot.objects.filter(episode=episode, name="step_29.png").exists():
        Screenshot.objects.filter(episode=episode).delete()
        Episode.objects.filter(pk=episode.pk).update(**_heavy_evidence(), screens=30)
        for n in range(30):
            blob = blob_store_image(data=png(n))
            Screenshot.objects.create(episode=episode, step=n, name=f"step_{n}.png", blob=blob)
    return episode


def _heavy_evidence() -> dict:
    log = [{"method": "POST" if n % 10 == 0 else "GET", "path": f"/sites/shop/items/{n}" if n % 7 else "/static/a.css",
            "query": {"q": f"lamp {n}", "page": n % 5}, "body": {"qty": n, "csrf_token": "t"} if n % 10 == 0 else None,
            "status": 200} for n in range(300)]
    changes = [{"collection": "cart_items", "op": "update", "before": {"id": n, "qty": 1, "name": f"item {n}"},
                "after": {"id": n, "qty": 2, "name": f"item {n}"}} for n in range(50)]
    actions = [{"click": {"index": n}} for n in range(30)]
    return {"request_log": log, "data_changes": changes, "actions": actions, "steps": 30,
            "answer": "The cart now holds two of each item.", "screen_text": ["home", "Cart: 50 items"]}
