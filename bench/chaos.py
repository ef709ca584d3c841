"""The chaos soak: for a set time, 20 reviewers label and take from a queue over HTTP while a judge run (the fake
Gemini on 127.0.0.1), an attempt run (Chromium, the scripted agent) and an export run work, one after another, and a
seeded schedule SIGKILLs workers and beat, restarts Redis with and without its data, terminates the PostgreSQL
connections and restarts the web server. Then it checks that nothing was lost or doubled.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME_chaos .venv/bin/python bench/chaos.py \
        [--minutes 10] [--seed 24] [--reviewers 20] [--redis-port 6395] [--web-port 8621]

The database must be a scratch one whose name ends in `_chaos`: it is dropped and made again at the start. Redis is
a redis-server of the soak's own on --redis-port (append-only; stopped at the end), never the machine's. It ends by
checking that every label post answered 2xx is stored with its history, that no episode has two judgments of one
config, and that every run it started finished or says why (after the faults stop, the runs get --drain seconds to
finish), and prints, per fault, how often it was tried, held (within --recover seconds of it the reviewers' posts
were answered again and the pipeline settled units again) and failed. Exit status 0 when every check passed and
every fault held. `tests/test_chaos_soak.py` runs the 2-minute soak.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--think", type=float, default=2.0, help="seconds a reviewer reads an episode")
    parser.add_argument("--redis-port", type=int, default=6395)
    parser.add_argument("--web-port", type=int, default=8621)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--drain", type=float, default=300, help="seconds the runs get to finish after the faults")
    parser.add_argument("--recover", type=float, default=90, help="seconds a fault's service gets to come back")
    parser.add_argument("--folder", type=Path, default=None)
    parser.add_argument("--no-faults", action="store_true", help="the same load without faults (a baseline)")
    return parser.parse_args()


def _fresh_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not url.startswith("postgres") or not name.endswith("_chaos"):
        print("bench/chaos.py: skipped: set DATABASE_URL to a scratch PostgreSQL database whose name ends in _chaos")
        raise SystemExit(0)  # `make bench` goes on to the next benchmark
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # only the soak's own database's sessions
        conn.execute(f'CREATE DATABASE "{name}"')


def _environment(args: argparse.Namespace, folder: Path, fake_url: str) -> None:
    """What every process of the soak reads (the children inherit it)."""
    redis_url = f"redis://127.0.0.1:{args.redis_port}/0"
    os.environ.update({
        "DJANGO_SETTINGS_MODULE": "taskgen.settings", "CELERY_BROKER_URL": redis_url, "REDIS_URL": redis_url,
        "TASKGEN_VAR_DIR": str(folder / "var"), "TASKGEN_MEDIA_ROOT": str(folder / "media"),
        "TASKGEN_DATA_ROOT": str(folder / "data"), "GEMINI_API_KEY": "chaos-key-not-real",
        "GOOGLE_GEMINI_BASE_URL": fake_url, "TASKGEN_LOG_FORMAT": "json", "TASKGEN_JUDGE_TIMEOUT": "30",
    })
    for name in ("var", "media", "data"):
        (folder / name).mkdir(parents=True, exist_ok=True)


def _stop_on_sigterm() -> None:
    """SIGTERM (a test's timeout, Ctrl-C's cousin) ends the soak through its `finally`: every process it started
    is stopped, none is left behind."""
    def stop(signum, frame):
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)


def main() -> int:
    args = _arguments()
    _stop_on_sigterm()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="taskgen-chaos-"))
    from tests.fakes.gemini_server import FakeGemini

    fake = FakeGemini(latency=0.3).start()
    _environment(args, folder, fake.base_url)
    _fresh_database(os.environ.get("DATABASE_URL", ""))
    import django

    django.setup()
    from django.core.management import call_command

    from bench.chaos_parts import soak as chaos_soak

    call_command("migrate", "--no-input", verbosity=0)
    print(f"bench/chaos.py: {args.minutes:g} min, seed {args.seed}, {args.reviewers} reviewers; logs in {folder} "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", flush=True)
    soak = chaos_soak.Soak(args, folder, fake, secrets.token_urlsafe(50))
    try:
        return soak.run()
    finally:
        soak.services.stop_all()
        fake.stop()


if __name__ == "__main__":
    sys.exit(main())
