"""The seed's own scale end to end: 52 sites x 140 proposed tasks through propose (fake Gemini), attempt through the
external-harness adapter (a fake harness that writes every episode folder at once), judge (fake Gemini) and export
(up to 27,644 steps), on the engine with its workers as docker-compose runs them; the wall time of each stage, where
it goes, and the app's overhead per unit beyond the fakes' latency. Target: the whole pipeline in 15 minutes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME CELERY_BROKER_URL=redis://127.0.0.1:6379/N \
        .venv/bin/python bench/seed_scale.py [--sites 52] [--per-site 140] [--batch 20] [--propose-latency 3] \
        [--judge-latency 0.3] [--budget 27644] [--json]

Everything is the bench's own: a fresh database `<NAME>_seed` (dropped and made again), the Redis database the broker
URL names (emptied first: give it one nobody else uses), files under var/bench/seed_scale/. The workers are those of
docker-compose.yml: the `judge` queue's (20 threads, 16 calls in flight), the `browser` and `default` queues' (prefork,
2 processes each), and beat (the reconciler). The sites are synthetic, in the reference's sitemap format (30 item
pages, search, cart, orders and account, a few controls), served over HTTP by a static server on 127.0.0.1. The fake
Gemini runs in this process: 3 s per proposal call and 0.3 s per judgment by default (the propose and judge benchmarks'
terms), judging 3 in 5 episodes a success. The judge's rate limit is lifted (TASKGEN_JUDGE_RPM 1,000,000): the
default 600 calls a minute would hold 7,280 judgments to 12 minutes. The fake harness (bench/seed_harness.py) writes
each task's episode (2-7 steps, real-size 1280x800 PNGs, each distinct) at once.

Per stage it prints: units (propose: the engine's batches; attempt, judge and export: episodes), model calls, wall
seconds, the floor the fakes allow (propose and judge: calls x latency / calls in flight, in whole waves: propose has
the engine's worker messages per run in flight, 8, the reference's --workers; the judge 16; attempt: the fake
harness's own writing time), the app's overhead per unit beyond it ((wall - floor) / units), and CPU per unit of the
workers (their process trees) and of the PostgreSQL backends (sampled every half second, so one that closed during
the stage counts but for its last half second); the fake Gemini's and the static site server's CPU is apart, in this
process. At the end: a table of the stages, their share of the wall time, and the whole pipeline (from the first
stage's start to the export's end, the workers started) against the 15-minute target; --json prints every figure as
one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.seed_parts import WORK  # noqa: E402 (the checkout on the path first)

TARGET_MINUTES = 15


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=52)
    parser.add_argument("--per-site", type=int, default=140)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--propose-latency", type=float, default=3.0)
    parser.add_argument("--judge-latency", type=float, default=0.3)
    parser.add_argument("--budget", type=int, default=27644)
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object at the end")
    return parser.parse_args()


def _fresh_database(url: str) -> str:
    import psycopg

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'taskgen'}_seed"
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def _environment(database_url: str, broker: str, fake_url: str) -> dict:
    harness = (f"{sys.executable} {ROOT / 'bench' / 'seed_harness.py'} --tasks {{tasks}} --arm {{arm}} "
               f"--out {{run_dir}} --pool {WORK / 'pool'}")
    return {"DATABASE_URL": database_url, "CELERY_BROKER_URL": broker, "REDIS_URL": broker,
            "TASKGEN_VAR_DIR": str(WORK / "var"), "TASKGEN_MEDIA_ROOT": str(WORK / "media"),
            "TASKGEN_DATA_ROOT": str(WORK / "data"), "DJANGO_SETTINGS_MODULE": "taskgen.settings",
            "GEMINI_API_KEY": "bench-key-not-real", "GOOGLE_GEMINI_BASE_URL": fake_url,
            "TASKGEN_JUDGE_RPM": "1000000", "TASKGEN_LOG_LEVEL": "WARNING",
            "TASKGEN_EXTERNAL_HARNESSES": json.dumps({"seed": {"command": harness, "timeout_seconds": 3600}})}


def _pool() -> None:
    """40 real-size pages drawn once (cached): the harness's screenshots are distinct copies of them."""
    from bench.import_run import draw_page

    folder = WORK / "pool"
    if len(list(folder.glob("*.png"))) == 40:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(40):
        (folder / f"page_{seed:02d}.png").write_bytes(draw_page(seed, 1280, 800))


def _sites(count: int, fake) -> tuple[list[str], subprocess.Popen]:
    """The synthetic sites: pages on disk, served over HTTP, registered from their sitemap files."""
    from bench.propose import _page_server, _write_site
    from taskgen.stages.propose.sites import external_site_register

    www, maps = WORK / "www", WORK / "sitemaps"
    maps.mkdir(parents=True, exist_ok=True)
    slugs = [f"seed{n:02d}" for n in range(count)]
    for slug in slugs:
        (maps / f"{slug}.json").write_text(json.dumps(_write_site(www, slug)))
    server, base_url = _page_server(www)
    for slug in slugs:
        external_site_register(slug=slug, sitemap_file=maps / f"{slug}.json", base_url=base_url)
    return slugs, server


def _table(figures: dict, total: float) -> None:
    """One line per stage and the whole pipeline against the target."""
    from bench.seed_parts import plural

    print(f"\n{'stage':8s} {'units':>15s} {'model calls':>11s} {'wall s':>8s} {'floor s':>8s} {'share':>6s} "
          f"{'overhead ms/unit':>16s} {'app CPU ms/unit':>15s} {'load':>5s}")
    for name, f in figures.items():
        print(f"{name:8s} {f['units']:>6,} {plural(f['unit']):>8s} {f['calls']:>11,} {f['wall_s']:>8.1f} "
              f"{f['ideal_s']:>8.1f} {f['wall_s'] / max(total, 0.001):>6.0%} {f['overhead_ms_per_unit']:>16.1f} "
              f"{f['app_cpu_ms_per_unit']:>15.1f} {f['load']:>5.1f}")
    floor = sum(f["ideal_s"] for f in figures.values())
    verdict = "met" if total <= TARGET_MINUTES * 60 else "NOT met"
    print(f"{'pipeline':8s} {'':>15s} {sum(f['calls'] for f in figures.values()):>11,} {total:>8.1f} {floor:>8.1f}\n"
          f"the whole pipeline: {total / 60:.1f} min against the target of {TARGET_MINUTES} min: {verdict} "
          f"(the fakes' floor {floor / 60:.1f} min; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)",
          flush=True)


def main() -> int:
    args = _args()
    database, broker = os.environ.get("DATABASE_URL", ""), os.environ.get("CELERY_BROKER_URL", "")
    if not database.startswith("postgres") or not broker.startswith("redis"):
        raise SystemExit("set DATABASE_URL (PostgreSQL: <NAME>_seed is made beside it) and CELERY_BROKER_URL (Redis)")
    for name in ("var", "media", "data", "www", "out"):
        shutil.rmtree(WORK / name, ignore_errors=True)
    _pool()
    from bench.seed_parts import SeedGemini, Stages, Workers, redis_flush

    fake = SeedGemini().start()
    os.environ.update(_environment(_fresh_database(database), broker, fake.base_url))
    redis_flush(broker)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slugs, pages = _sites(args.sites, fake)
    workers = Workers(WORK / "logs", dict(os.environ))
    stages = Stages(args, fake, workers)
    try:
        workers.start()
        started = time.perf_counter()
        stages.propose(slugs)
        stages.attempt(slugs)
        stages.judge()
        stages.export()
        total = time.perf_counter() - started
    finally:
        workers.stop()
        fake.stop()
        pages.terminate()
    _table(stages.figures, total)
    if args.json:
        print(json.dumps({"total_s": round(total, 1), "target_s": TARGET_MINUTES * 60,
                          "target_met": total <= TARGET_MINUTES * 60, "load": round(os.getloadavg()[0], 1),
                          "cores": os.cpu_count(), "sites": args.sites, "per_site": args.per_site,
                          "stages": stages.figures}, indent=1))
    return 0



if __name__ == "__main__":
    sys.exit(main())
