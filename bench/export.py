"""Export 27,644 steps (3,000 episodes on 52 sites, one row image per step) and print time and peak memory.

Target: the folder export under 10 s and 200 MB (the reference's file-copying `rows` does about 6,700 rows/s).
Runs on its own SQLite database and folders in a temporary directory:  .venv/bin/python bench/export.py
"""
from __future__ import annotations

import io
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

EPISODES, STEPS, SITES, DISTINCT_IMAGES = 3000, 27644, 52, 1500

WORK = Path(tempfile.mkdtemp(prefix="bench-export-"))
os.environ.update({"DJANGO_SETTINGS_MODULE": "taskgen.settings", "TASKGEN_VAR_DIR": str(WORK / "var"),
                   "TASKGEN_MEDIA_ROOT": str(WORK / "media"), "TASKGEN_DATA_ROOT": str(WORK / "data")})
os.environ.pop("DATABASE_URL", None)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from PIL import Image  # noqa: E402

from taskgen.blobs import blob_path  # noqa: E402
from taskgen.models import Blob, Episode, JudgeConfig, Judgment, Run, Screenshot, Site, Task  # noqa: E402
from taskgen.stages.export.output import export_stream_targz  # noqa: E402
from taskgen.stages.export.service import export_create  # noqa: E402


def make_blobs() -> list[Blob]:
    rng = random.Random(7)
    blobs = []
    for i in range(DISTINCT_IMAGES):
        # a page-like screenshot: flat colour with a band of noise, about 20 KB as PNG
        image = Image.new("RGB", (640, 400), (rng.randrange(256), 240, 240))
        image.paste(Image.frombytes("RGB", (640, 10), rng.randbytes(640 * 10 * 3)), (0, rng.randrange(390)))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        data = buffer.getvalue()
        blob = Blob(sha256=f"{i:064x}", size=len(data), width=640, height=400)
        blob_path(blob).parent.mkdir(parents=True, exist_ok=True)
        blob_path(blob).write_bytes(data)
        blobs.append(blob)
    return Blob.objects.bulk_create(blobs)


def make_run(blobs: list[Blob]) -> tuple[Run, JudgeConfig]:
    run = Run.objects.create(name="bench", source_dir=str(WORK / "run"))
    config = JudgeConfig.objects.create(provider="rules", model="rules-v1", prompt_version="v1")
    sites = Site.objects.bulk_create([Site(slug=f"site-{s:02d}") for s in range(SITES)])
    tasks = Task.objects.bulk_create([Task(task_id=f"tg-{sites[i % SITES].slug}-{i}", site=sites[i % SITES],
                                           instruction=f"task {i}") for i in range(EPISODES)])
    extra = STEPS - EPISODES * (STEPS // EPISODES)
    counts = [STEPS // EPISODES + (i < extra) for i in range(EPISODES)]
    row = '{"step": %d, "obs": "' + "x" * 600 + '", "action": "click(3)"}\n'
    episodes = Episode.objects.bulk_create([
        Episode(run=run, task=t, site=t.site, task_order=i, rows_jsonl="".join(row % s for s in range(counts[i])),
                episode_json='{"ok": true}', has_rows=True, row_count=counts[i], steps=counts[i])
        for i, t in enumerate(tasks)], batch_size=500)
    Screenshot.objects.bulk_create([
        Screenshot(episode=e, kind="row", step=s, name=f"step_{s}.png", blob=blobs[(i * 11 + s) % len(blobs)])
        for i, e in enumerate(episodes) for s in range(counts[i])], batch_size=2000)
    Judgment.objects.bulk_create([Judgment(episode=e, config=config, verdict="SUCCESS") for e in episodes],
                                 batch_size=1000)
    return run, config


def timed(label: str, work) -> None:
    start = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    work_again = work  # a second pass measures memory (tracemalloc slows the first down too much to time)
    work_again()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"{label}: {seconds:.2f} s, {STEPS / seconds:,.0f} rows/s, peak traced memory {peak / 1e6:.1f} MB"
          + (f", {result}" if result else ""))


def main() -> None:
    call_command("migrate", verbosity=0)
    blobs = make_blobs()
    run, config = make_run(blobs)
    image_mb = sum(b.size for b in blobs) / len(blobs) * STEPS / 1e6
    print(f"{EPISODES} episodes, {STEPS} steps, {STEPS} row images (~{image_mb:,.0f} MB), {SITES} sites")
    n = iter(range(100))

    def to_folder() -> str:
        export = export_create(run=run, source="judge", judge_config=config, out_dir=f"rows-{next(n)}")
        return f"{export.report['selected_rows']} rows in {export.report['selected_trajectories']} episodes"

    timed("export to a folder", to_folder)
    export = export_create(run=run, source="judge", judge_config=config)

    def to_targz() -> str:
        size = sum(len(chunk) for chunk in export_stream_targz(export=export))
        return f"{size / 1e6:,.0f} MB of .tar.gz"

    timed("stream .tar.gz", to_targz)
    print(f"process peak RSS {__import__('resource').getrusage(0).ru_maxrss / 1e3:.0f} MB (setup included)")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
