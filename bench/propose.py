"""Propose benchmark: 5 sites x 140 tasks at batch 20 through the gemini proposer on the engine, against a fake
Gemini with 3 s latency, 8 calls in flight (the command line's way: 8 threads working the run's units), on a fresh
database (SQLite in a temporary folder; PostgreSQL with --pg, using DATABASE_URL). The sites are served over HTTP
by a static server on 127.0.0.1 (their pages fetched as for any site that is not the sandbox). Prints:

  - kept tasks per minute and its ratio to the ideal (8 calls of 20 tasks per 3 s; target: at least 90%), and to the
    ideal for whole waves of calls (ceil(calls / 8) x 3 s);
  - app CPU ms per kept task (this process: with SQLite the database work too; with --pg the PostgreSQL backends'
    CPU is not counted, as the workers' connections close with them; target: under 5 ms);
  - the machine's load (os.getloadavg) beside each figure.

    .venv/bin/python bench/propose.py [--sites 5] [--per-site 140] [--batch 20] [--latency 3] [--concurrency 8] [--pg]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="propose throughput and CPU benchmark")
    parser.add_argument("--sites", type=int, default=5)
    parser.add_argument("--per-site", type=int, default=140)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--latency", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--pg", action="store_true", help="use DATABASE_URL (a fresh database it names)")
    return parser.parse_args()


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count() or 1} cores"


def _setup_django(tmp: Path, pg: bool) -> None:
    os.environ.update({"TASKGEN_VAR_DIR": str(tmp), "TASKGEN_MEDIA_ROOT": str(tmp / "media"),
                       "TASKGEN_DATA_ROOT": str(tmp / "data"), "DJANGO_SETTINGS_MODULE": "taskgen.settings",
                       "GEMINI_API_KEY": "bench-key-not-real", "TASKGEN_ENGINE_WORKERS_PER_RUN": "8",
                       "TASKGEN_LOG_LEVEL": "WARNING"})
    for name in ("CELERY_BROKER_URL", "REDIS_URL") + (() if pg else ("DATABASE_URL",)):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _site_pages(slug: str) -> list[dict]:
    pages = [{"path": f"/sites/{slug}/", "title": f"Bench {slug} — home"}]
    pages += [{"path": f"/sites/{slug}/item/{k}/", "title": f"Item {slug} {k} — Bench {slug}"} for k in range(30)]
    return pages + [{"path": f"/sites/{slug}/{name}/", "title": f"{name} — Bench {slug}"}
                    for name in ("search", "cart", "orders", "account")]


def _write_site(folder: Path, slug: str) -> dict:
    """A static site on disk (one index.html per page) and its sitemap in the reference's format."""
    pages = _site_pages(slug)
    controls = [{"kind": "search", "label": "Search items", "name": "q", "page": f"/sites/{slug}/search/",
                 "options": []},
                {"kind": "select", "label": "Sort by", "name": "sort", "page": f"/sites/{slug}/search/",
                 "options": [{"text": t, "value": t} for t in ("Price", "Name", "Rating")]},
                {"kind": "button", "label": "Add to cart", "name": "", "page": f"/sites/{slug}/item/0/",
                 "options": []}]
    for page in pages:
        target = folder / page["path"].strip("/") / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"<li>{p['title']}</li>" for p in pages[:12])
        target.write_text(f"<html><title>{page['title']}</title><h1>{page['title']}</h1><ul>{body}</ul></html>")
    return {"name": f"Bench {slug}", "pages": pages, "controls": controls}


def _start(command: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _page_server(folder: Path) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = _start([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], folder)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    args = _args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-propose-"))
    _setup_django(tmp, args.pg)
    from taskgen.engine.control import run_start
    from taskgen.engine.wait import run_wait
    from taskgen.models import PipelineRun, ProposalBatch, Site, Task

    slugs = [f"bench{n}" for n in range(args.sites)]
    site_root = tmp / "www"
    maps = {slug: _write_site(site_root, slug) for slug in slugs}
    pages, pages_url = _page_server(site_root)
    fake = _start([sys.executable, "-m", "tests.fakes.gemini_server", "--latency", str(args.latency)], ROOT)
    base_url = fake.stdout.readline().strip()
    from django.conf import settings

    settings.GOOGLE_GEMINI_BASE_URL = base_url
    for slug in slugs:
        Site.objects.create(slug=slug, name=maps[slug]["name"], base_url=pages_url, sitemap=maps[slug])
    try:
        print(f"proposing {args.per_site} tasks for each of {args.sites} sites in batches of {args.batch}, "
              f"{args.concurrency} calls in flight, fake Gemini {args.latency} s per call ({_load()})")
        cpu_before = time.process_time()
        pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={
            "provider": "gemini", "sites": slugs, "per_site": args.per_site, "batch": args.batch})
        run_wait(pipeline_run=pipeline_run, stream=sys.stderr if os.environ.get("BENCH_VERBOSE") else _Quiet(),
                 work_here=args.concurrency, poll_seconds=0.5)
        cpu = time.process_time() - cpu_before
        pipeline_run.refresh_from_db()
        _report(args, pipeline_run, cpu, Task, ProposalBatch)
    finally:
        fake.terminate()
        pages.terminate()


class _Quiet:
    def write(self, text: str) -> None:
        pass


def _report(args, pipeline_run, cpu: float, Task, ProposalBatch) -> None:  # noqa: N803 (model classes)
    kept = Task.objects.filter(proposal_batch__pipeline_run=pipeline_run).count()
    calls = ProposalBatch.objects.filter(pipeline_run=pipeline_run).count()
    wall = (pipeline_run.finished_at - pipeline_run.started_at).total_seconds()
    rate = kept / wall * 60
    ideal = args.concurrency * args.batch / args.latency * 60
    waves = math.ceil(calls / args.concurrency) * args.latency
    print(json.dumps({"status": pipeline_run.status, "kept": kept, "calls": calls, "failed_units": pipeline_run.failed,
                      "wall_s": round(wall, 2)}))
    print(f"rate: {rate:.0f} tasks/min = {rate / ideal:.0%} of the ideal {ideal:.0f}/min "
          f"({waves / wall:.0%} of the whole-wave ideal, {waves:.0f} s for {calls} calls) ({_load()})")
    print(f"CPU: {cpu * 1000 / max(kept, 1):.2f} ms per kept task "
          f"({cpu:.2f} s in this process{'; PostgreSQL not counted' if args.pg else ''}) ({_load()})")


if __name__ == "__main__":
    main()
