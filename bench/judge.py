"""Judge benchmark: 1,000 episodes through the gemini judge against a fake Gemini (300 ms per call) at 16 concurrent
calls, on a fresh SQLite database in a temporary folder. Prints:

  - episodes/s and its ratio to the ideal 16 / 0.3 s (target: at least 85%);
  - app CPU ms per judgment (this process only: the fake server runs in its own process; target: at most 20 ms),
    with screenshots already prepared, plus the one-time cost of preparing a new screenshot under the image policy;
  - image bytes and input tokens per episode under the default image policy vs full-size PNGs (target: at least 40%
    fewer image tokens).

    .venv/bin/python bench/judge.py [--episodes 1000] [--concurrency 16] [--latency 0.3]
"""
from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORDS = ("order cart price total shipping mug kettle blue red size search results filter sort account inbox "
         "message booking room date guests checkout review rating stock delivery returns").split()


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="judge throughput, CPU and image-cost benchmark")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--shots", type=int, default=40, help="distinct screenshots shared by the episodes")
    parser.add_argument("--processes", type=int, default=1, help="worker processes sharing the concurrent calls")
    parser.add_argument("--full-sample", type=int, default=100, help="episodes also judged with full-size PNGs")
    return parser.parse_args()


def _setup_django(tmp: Path) -> None:
    os.environ.update({"TASKGEN_VAR_DIR": str(tmp), "TASKGEN_MEDIA_ROOT": str(tmp / "media"),
                       "DJANGO_SETTINGS_MODULE": "taskgen.settings", "GEMINI_API_KEY": "bench-key-not-real",
                       "TASKGEN_JUDGE_RPM": "1000000", "TASKGEN_JUDGE_RETRY_BASE": "0.05"})
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _start_fake(latency: float) -> tuple[subprocess.Popen, str]:
    fake = subprocess.Popen([sys.executable, "-m", "tests.fakes.gemini_server", "--latency", str(latency)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return fake, fake.stdout.readline().strip()


def _page_png(rng: random.Random) -> bytes:
    """A 1280x800 page-like screenshot: header bar, lines of small text, a few coloured boxes."""
    import io

    from PIL import Image, ImageDraw

    image = Image.new("RGB", (1280, 800), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 1280, 60), fill=(rng.randrange(256), rng.randrange(256), 120))
    for y in range(80, 780, 18):
        x = 40 + rng.randrange(0, 400) if rng.random() < 0.2 else 40
        draw.text((x, y), " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 16))), fill=(20, 20, 20))
    for _ in range(4):
        left, top = rng.randrange(700, 1100), rng.randrange(80, 650)
        draw.rectangle((left, top, left + 150, top + 100), fill=tuple(rng.randrange(256) for _ in range(3)))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _make_episodes(count: int, shots: int) -> tuple[list[int], list]:
    from taskgen.blobs import blob_store_image
    from taskgen.models import Episode, Run, Screenshot, Site, Task

    rng = random.Random(7)
    blobs = [blob_store_image(data=_page_png(rng)) for _ in range(shots)]
    site = Site.objects.create(slug="bench-shop", name="Bench shop")
    run = Run.objects.create(name="bench")
    tasks = Task.objects.bulk_create(
        Task(task_id=f"bench-{i:05d}", site=site, task_kind="action",
             instruction=f"Search for item {i} and add two of them to the cart") for i in range(count))
    episodes = Episode.objects.bulk_create(Episode(
        run=run, task=task, site=site, task_kind="action", task_order=i, answer=f"Added item {i}.",
        actions=[{"click": {"index": i % 30}}, {"type": {"text": f"item {i}"}}, {"done": {}}],
        request_log=[{"method": "GET", "path": "/sites/shop/search", "query": {"q": f"item {i}"}, "status": 200},
                     {"method": "POST", "path": "/sites/shop/cart", "body": {"item": i, "qty": 2}, "status": 302}],
        data_changes=[{"table": "cart", "before": None, "after": {"id": i, "name": f"item {i}"},
                       "changed": {"qty": 2}}],
        screen_text=[f"Cart: item {i} x2"]) for i, task in enumerate(tasks))
    ids = list(Episode.objects.filter(run=run).order_by("task_order").values_list("pk", flat=True))
    Screenshot.objects.bulk_create(
        Screenshot(episode_id=episode_id, kind="step", step=step, name=f"step_{step}.png",
                   blob=blobs[(i + step) % shots]) for i, episode_id in enumerate(ids) for step in range(4))
    assert len(episodes) == len(ids)
    return ids, blobs


def _prepare_cost(blobs: list) -> float:
    """CPU ms to prepare one new screenshot under the default policy (done once per screenshot, then cached)."""
    from taskgen.stages.judge.images import image_policy, prepared_image

    started = time.process_time()
    for blob in blobs:
        prepared_image(blob=blob, policy=image_policy("default"))
    return (time.process_time() - started) * 1000 / len(blobs)


def _judge_slice(ids: list[int], config_id: int, threads: int) -> None:
    from django.db import connection

    from taskgen.stages.judge.service import judge_episode

    def one(episode_id: int) -> None:
        try:
            judge_episode(episode_id=episode_id, config_id=config_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, ids))


def _judge_all(ids: list[int], config_id: int, concurrency: int, processes: int) -> tuple[float, float]:
    """Judge `ids` with `concurrency` calls in flight, split over worker processes as Celery would run them;
    returns (wall seconds, CPU seconds of the judging processes)."""
    import multiprocessing
    import resource

    from django.db import connections

    connections.close_all()  # children must not share the parent's database connection
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_judge_slice, args=(ids[p::processes], config_id, concurrency // processes))
               for p in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - wall, cpu


def _per_episode(config) -> tuple[float, float]:
    from django.db.models import Avg

    from taskgen.models import Judgment

    row = Judgment.objects.filter(config=config).aggregate(b=Avg("image_bytes"), t=Avg("input_tokens"))
    return row["b"] or 0.0, row["t"] or 0.0


def main() -> None:
    args = _args()
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        _setup_django(Path(tmp))
        fake, url = _start_fake(args.latency)
        try:
            from django.conf import settings

            from taskgen.models import Judgment
            from taskgen.stages.judge.service import judge_config_for

            settings.GOOGLE_GEMINI_BASE_URL = url
            ids, blobs = _make_episodes(args.episodes, args.shots)
            prepare_ms = _prepare_cost(blobs)
            default = judge_config_for("gemini", None, None, "default")
            wall, cpu = _judge_all(ids, default.pk, args.concurrency, args.processes)
            full = judge_config_for("gemini", None, None, "full")
            _judge_all(ids[: args.full_sample], full.pk, args.concurrency, args.processes)
        finally:
            fake.terminate()
            fake.wait(10)
        judged = Judgment.objects.filter(config=default).exclude(verdict="NONE").count()
        ideal = args.concurrency / args.latency
        bytes_default, tokens_default = _per_episode(default)
        bytes_full, tokens_full = _per_episode(full)
        text_tokens = _text_tokens(ids[0], default)
        print(f"machine load average    {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a busy machine lowers "
              f"throughput, not CPU per judgment)")
        print(f"episodes judged          {judged} of {len(ids)} in {wall:.1f} s by {args.processes} processes")
        print(f"throughput               {len(ids) / wall:.1f} episodes/s; ideal {ideal:.1f}/s "
              f"({args.concurrency} concurrent / {args.latency} s); ratio {len(ids) / wall / ideal:.1%}")
        print(f"app CPU per judgment     {cpu * 1000 / len(ids):.1f} ms (screenshots prepared; all judging processes)")
        print(f"preparing a screenshot   {prepare_ms:.1f} ms CPU once per new screenshot (default policy)")
        print(f"image bytes per episode  default {bytes_default:,.0f} vs full-size PNG {bytes_full:,.0f} "
              f"({1 - bytes_default / bytes_full:.0%} fewer)")
        image_default, image_full = tokens_default - text_tokens, tokens_full - text_tokens
        print(f"input tokens per episode default {tokens_default:,.0f} vs full {tokens_full:,.0f}; image tokens "
              f"{image_default:,.0f} vs {image_full:,.0f} ({1 - image_default / image_full:.0%} fewer)")


def _text_tokens(episode_id: int, config) -> int:
    """The text part of an episode's prompt in the fake server's count (a token per 4 characters)."""
    import math

    from taskgen.models import Episode
    from taskgen.stages.judge.service import judge_request_build

    built = judge_request_build(episode=Episode.objects.get(pk=episode_id), config=config)
    return math.ceil((len(built.request.system) + len(built.request.prompt)) / 4)


if __name__ == "__main__":
    main()
