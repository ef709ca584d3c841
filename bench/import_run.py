"""Benchmark: import a run dir of 2,000 episodes with 10 screenshots each; prints episodes/s and the blob store's size.

As a user runs it first (target: 1,000 episodes/s): `python manage.py taskgen import RUN_DIR`, a whole process (Python's
start, Django's setup, the engine's run, the worker processes that read and hash the files), on a database and media
root of its own, its wall time and its CPU from os.wait4 (the process and the worker processes it waited for); then
once more (nothing new). Then the machine's floor (bench/import_floor.py): the same screenshots read, hashed and
stored by a bare loop in as many processes, no checks, no database, no start: the gap between it and the whole import
is the app's own cost; and the same loop with each new blob appended to one file per process instead of a file of
its own (the floor of a store that packed its blobs). Then, as a diagnosis, the same import in this process
(import_run_dir), its CPU and its workers' apart, and PostgreSQL's backend CPU besides. Each CPU figure says the
kernel's share: most of it creates the blob files. This machine's root file system is ext4 without a journal, whose
inode allocator passes over each inode freed in the last half minute (the kernel's `recently_deleted`): making the
store's 12,200 files soon after other files were deleted costs the kernel several times what it costs on a journaled
ext4. So the first import runs once more with its blob store on a journaled ext4 made on the same disk (bench/disk.py;
it needs root and a loop device), and `--perf` shows where the kernel's time goes on each. The other swing is the
machine's memory: on a virtual machine whose free pages go back to its host (virtio-balloon's free page reporting,
which the first line says), copying the new blobs' 408 MB into the page cache costs up to a quarter of the import's
CPU when the pages it takes were given back (perf: copy_folio_from_iter_atomic), on any file system.

Standalone: `.venv/bin/python bench/import_run.py [--episodes N]`. It sets Django up itself on a temporary SQLite
database (or throwaway `test_<name>` and `test_<name>_cli` PostgreSQL databases when DATABASE_URL is set) and
temporary media roots. The final figures (PostgreSQL, a quiet machine, twice in a row):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/taskgen .venv/bin/python bench/import_run.py

The screenshots are real PNGs (1280x720, drawn with Pillow). A pool of pages is drawn once; each episode uses some pool
images byte for byte (a home page many episodes see: stored once) and makes the rest unique by adding a text chunk to
a pool image (different bytes, same pixel work for the importer's checks), so drawing 20,000 images is not the
benchmark's cost.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def draw_page(seed: int, width: int = 1280, height: int = 720) -> bytes:
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    image = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = rng.randrange(width), rng.randrange(height)
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        draw.rectangle([x, y, x + rng.randrange(40, 300), y + rng.randrange(20, 120)], fill=colour)
    for i in range(30):
        draw.text((rng.randrange(width), rng.randrange(height)), f"item {seed}-{i} ${rng.randrange(999)}", fill=0)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def with_text_chunk(png: bytes, text: str) -> bytes:
    """The same PNG with a tEXt chunk after IHDR: other bytes, same image."""
    body = b"Comment\0" + text.encode()
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    return png[:33] + chunk + png[33:]


def grade_inputs(n: int, steps: int) -> dict:
    actions = [{"click": {"index": i}} for i in range(steps - 1)] + [{"answer": {"text": f"answer {n}"}}]
    log = [{"method": "GET", "path": f"/sites/shop/item/{i}", "query": {"q": "x"}, "body": None, "status": 200}
           for i in range(steps)]
    changes = [{"collection": "cart", "op": "create", "before": None, "after": {"id": n}, "changed": {"qty": 1}}]
    return {"actions": actions, "answer": f"The price is {n}", "log": log, "changes": changes,
            "seen": [f"page text {n} " * 100]}


def build_run(run_dir: Path, *, episodes: int, shots: int, shared: int, pool_size: int) -> int:
    """Write the run dir; returns the screenshot bytes written."""
    pool = [draw_page(seed) for seed in range(pool_size)]
    run_dir.mkdir(parents=True)
    lines, written = [], 0
    for n in range(episodes):
        task_id = f"bench-site{n % 20}-{n:06d}"
        lines.append(json.dumps({"kind": "proposed", "task_id": task_id, "site": f"site{n % 20}",
                                 "instruction": f"Do task {n}", "start_path": "/", "task_kind": "action"}))
        folder = run_dir / task_id
        (folder / "screenshots").mkdir(parents=True)
        (folder / "rows").mkdir()
        (folder / "grade_inputs.json").write_text(json.dumps(grade_inputs(n, shots)))
        (folder / "rows" / "rows.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in range(shots)))
        (folder / "rows" / "episode.json").write_text(json.dumps({"task_id": task_id}))
        for i in range(shots):
            data = pool[(n + i) % pool_size] if i < shared else with_text_chunk(pool[(n * 7 + i) % pool_size],
                                                                                  f"{n}/{i}")
            path = folder / "final.png" if i == shots - 1 else folder / "screenshots" / f"step_{i}.png"
            path.write_bytes(data)
            written += len(data)
    (run_dir / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return written


def setup_django(tmp: Path) -> str | None:
    os.environ["TASKGEN_VAR_DIR"] = str(tmp / "var")
    os.environ["TASKGEN_MEDIA_ROOT"] = str(tmp / "media")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "sqlite":
        call_command("migrate", verbosity=0)
        return None
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True)
    return old_name


def _cpu_seconds(since: tuple[float, ...] = (0.0,) * 4) -> tuple[float, ...]:
    """CPU seconds used by this process and by its finished worker processes, then the kernel's share of each (since
    an earlier reading)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    now = (own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime, own.ru_stime, children.ru_stime)
    return tuple(value - before for value, before in zip(now, since, strict=True))


def folder_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--screenshots", type=int, default=10, help="per episode (the last is final.png)")
    parser.add_argument("--shared", type=int, default=4, help="of each episode's screenshots, how many are pool pages")
    parser.add_argument("--pool", type=int, default=200, help="distinct pages drawn")
    parser.add_argument("--perf", action="store_true",
                        help="also profile the first import on each file system with perf (the kernel's share)")
    parser.add_argument("--py-spy", action="store_true",
                        help="also profile one more whole-process import with py-spy (pip install py-spy)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="taskgen-bench-") as tmp_name:
        tmp = Path(tmp_name)
        old_db = setup_django(tmp)
        try:
            report(tmp, args)
        finally:
            if old_db is not None:
                from django.db import connection

                connection.creation.destroy_test_db(old_db, verbosity=0)
    return 0


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} CPUs"


def _cli_env(tmp: Path, kind: str = "cli", media: Path | None = None) -> dict:
    """The environment of a whole-process import: a var dir, media root (under `media`, default tmp) and database of
    its own (on PostgreSQL a fresh `<test database>_<kind>` beside this process's), migrated before it is timed."""
    from urllib.parse import urlsplit, urlunsplit

    from django.db import connection

    env = {**os.environ, "TASKGEN_VAR_DIR": str(tmp / f"{kind}-var"),
           "TASKGEN_MEDIA_ROOT": str((media or tmp) / f"{kind}-media")}
    if connection.vendor == "postgresql":
        import psycopg

        parts = urlsplit(os.environ["DATABASE_URL"])
        name = f"{connection.settings_dict['NAME']}_{kind}"
        with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"], cwd=ROOT, env=env,
                   check=True)
    return env


def _cli_drop(env: dict) -> None:
    from urllib.parse import urlsplit, urlunsplit

    if not env.get("DATABASE_URL", "").startswith("postgres"):
        return
    import psycopg

    parts = urlsplit(env["DATABASE_URL"])
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def _cli_import(tmp: Path, env: dict, prefix: list[str] | None = None) -> tuple[float, float, float]:
    """One `python manage.py taskgen import RUN_DIR` process: (wall seconds, CPU seconds of it and its workers, the
    kernel's share of them)."""
    command = [*(prefix or []), sys.executable, str(ROOT / "manage.py"), "taskgen", "import", str(tmp / "run")]
    started = time.perf_counter()
    with (tmp / "cli-import.log").open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"taskgen import failed:\n{(tmp / 'cli-import.log').read_text()[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_stime


def _first_import(tmp: Path, kind: str, *, media: Path | None = None,
                  prefix: list[str] | None = None) -> tuple[float, float, float]:
    """One first import as a whole process, in a database and media root of its own (_cli_env), dropped after."""
    env = _cli_env(tmp, kind, media=media)
    try:
        return _cli_import(tmp, env, prefix=prefix)
    finally:
        _cli_drop(env)


def as_users_run_it(tmp: Path, args: argparse.Namespace) -> None:
    """`python manage.py taskgen import RUN_DIR` as whole processes: wall time, episodes/s, CPU per episode."""
    env = _cli_env(tmp)
    try:
        for label in ("first import", "second import (nothing new)"):
            seconds, cpu, kernel = _cli_import(tmp, env)
            print(f"as users run it, {label}: `taskgen import RUN_DIR` {seconds:.2f}s, "
                  f"{args.episodes / seconds:.0f} episodes/s (target 1,000); CPU {cpu:.2f}s = "
                  f"{cpu * 1000 / args.episodes:.2f} ms per episode (the process and its workers; {kernel:.2f}s of "
                  f"it in the kernel) ({load()})")
    finally:
        _cli_drop(env)
    on_journaled_ext4(tmp, args)
    if args.py_spy:
        _py_spy(tmp, args)


def on_journaled_ext4(tmp: Path, args: argparse.Namespace) -> None:
    """The same first import with its media root (the blob store) on a journaled ext4 made on this machine's disk
    (bench/disk.py): the file system most machines have, beside the one this machine's root has."""
    from bench.disk import journaled_ext4

    with journaled_ext4(tmp / "journaled.img", tmp / "journaled") as mounted:
        if isinstance(mounted, str):
            print(f"on a journaled ext4: not measured ({mounted}; it needs root and a loop device)")
            return
        seconds, cpu, kernel = _first_import(tmp, "journaled", media=mounted)
        print(f"as users run it, first import, its blob store on a journaled ext4 made on this disk: {seconds:.2f}s, "
              f"{args.episodes / seconds:.0f} episodes/s (target 1,000); CPU {cpu:.2f}s = "
              f"{cpu * 1000 / args.episodes:.2f} ms per episode ({kernel:.2f}s of it in the kernel) ({load()})")


def perf_report(tmp: Path, args: argparse.Namespace) -> None:
    """--perf, last (its stores are left for the end: deleting them would slow what followed): the first import on
    each file system once more under perf, where the kernel's time goes."""
    from bench.disk import journaled_ext4

    _perf(tmp, args, tmp, "on this machine's disk", kind="perf_disk")
    with journaled_ext4(tmp / "perf-journaled.img", tmp / "perf-journaled") as mounted:
        if isinstance(mounted, str):
            print(f"perf on a journaled ext4: not measured ({mounted})")
        else:
            _perf(tmp, args, mounted, "on the journaled ext4", kind="perf_journaled")


def _perf(tmp: Path, args: argparse.Namespace, media: Path, where: str, *, kind: str) -> None:
    """One more first import (a fresh database and media root under `media`) under perf: where the kernel's time
    goes."""
    from bench.disk import kernel_summary, perf_prefix

    data = tmp / f"{kind}.perf.data"
    prefix = perf_prefix(data)
    if isinstance(prefix, str):
        print(f"perf of `taskgen import` {where}: not measured ({prefix})")
        return
    seconds, cpu, _ = _first_import(tmp, kind, media=media, prefix=prefix)
    # One more import than the timed ones: the machine's memory may have moved since (its kernel share with it).
    print(f"perf of one more first `taskgen import` {where} (not the timed one): {seconds:.2f}s, CPU {cpu:.2f}s "
          f"under the sampler ({load()})")
    print("\n".join("  " + line for line in kernel_summary(data)))


def _py_spy(tmp: Path, args: argparse.Namespace) -> None:
    """One more first import, in a fresh database and media root, under py-spy (the importing process; its file
    workers are other processes py-spy follows with --subprocesses)."""
    from bench.py_spy import py_spy_prefix, py_spy_top

    raw = ROOT / "var" / "bench" / "import.py-spy.txt"  # kept for a closer look (collapsed stacks)
    raw.parent.mkdir(parents=True, exist_ok=True)
    seconds, cpu, _ = _first_import(tmp, "spy", prefix=[*py_spy_prefix(raw)[:-1], "--subprocesses", "--"])
    print(f"py-spy of `taskgen import`: {seconds:.2f}s, CPU {cpu * 1000 / args.episodes:.2f} ms per episode under "
          f"the sampler (py-spy's own included) ({load()})")
    print("\n".join("  " + line for line in py_spy_top(raw, root=str(ROOT) + "/")))


def floor_report(tmp: Path, args: argparse.Namespace) -> None:
    """The machine's floor (bench/import_floor.py): the screenshots read, hashed and stored by a bare loop in the
    importer's number of worker processes; the most any import could reach here, before Python's start."""
    from django.conf import settings

    from bench.import_floor import import_floor

    processes = max(1, min(settings.IMPORT_WORKERS, os.cpu_count() or 1))
    floor = import_floor(tmp / "run", tmp / "floor-store", processes)
    print(f"the machine's floor: {floor.files} screenshots read, hashed and {floor.stored} stored by a bare loop in "
          f"{processes} processes (no checks, no database, no start): {floor.seconds:.2f}s = "
          f"{args.episodes / floor.seconds:.0f} episodes/s at most; CPU {floor.cpu:.2f}s, {floor.kernel:.2f}s of it "
          f"in the kernel ({load()})")
    packed = import_floor(tmp / "run", tmp / "floor-pack", processes, packed=True)
    print(f"  the same loop, each new blob appended to one file per process instead of a file each (a store that "
          f"packed its blobs; {packed.stored_bytes / 1e6:.1f} MB against {floor.stored_bytes / 1e6:.1f} MB): "
          f"{packed.seconds:.2f}s = "
          f"{args.episodes / packed.seconds:.0f} episodes/s at most; CPU {packed.cpu:.2f}s, {packed.kernel:.2f}s of "
          f"it in the kernel ({load()})")


def report(tmp: Path, args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.db import connection

    from bench.cpu import BackendsSampled
    from bench.disk import file_system, machine_memory
    from taskgen.stages.import_.service import import_run_dir

    started = time.perf_counter()
    input_bytes = build_run(tmp / "run", episodes=args.episodes, shots=args.screenshots, shared=args.shared,
                            pool_size=args.pool)
    # On the disk before any clock starts, as a harness's run dir is long before its import: written just now, its
    # 668 MB would be flushed by the kernel during the first import, on the same two cores.
    os.sync()
    print(f"built {args.episodes} episodes x {args.screenshots} screenshots ({input_bytes / 1e6:.1f} MB of PNG) "
          f"in {time.perf_counter() - started:.1f}s, synced to disk; database: {connection.vendor}; "
          f"cpus: {os.cpu_count()}; the blob stores' disk: {file_system(tmp)}; memory: {machine_memory()}")
    as_users_run_it(tmp, args)
    floor_report(tmp, args)
    print("diagnosis: the same import in this process (import_run_dir), its CPU and its workers' apart")
    for label in ("first import", "second import (nothing new)"):
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        with BackendsSampled() as backends:
            summary = import_run_dir(run_dir=tmp / "run")
        seconds, (cpu, workers_cpu, kernel, workers_kernel) = time.perf_counter() - started, _cpu_seconds(cpu_started)
        # CPU seconds too: on a shared machine the wall clock also measures everyone else's work.
        print(f"{label}: {seconds:.2f}s, {args.episodes / seconds:.0f} episodes/s; CPU {cpu:.2f}s here + "
              f"{workers_cpu:.2f}s in workers = {args.episodes / max(cpu + workers_cpu, 1e-9):.0f} episodes per CPU "
              f"s (the kernel's share {kernel:.2f} + {workers_kernel:.2f}s; besides, PostgreSQL's backend "
              f"{backends.cpu:.2f}s); "
              f"{summary.episodes_added} added, {summary.episodes_unchanged} unchanged, "
              f"{summary.screenshots} screenshots, {len(summary.skipped)} skipped ({load()})")
    count, size = folder_size(Path(settings.MEDIA_ROOT) / "blobs")
    print(f"blob store: {count} files, {size / 1e6:.1f} MB for {input_bytes / 1e6:.1f} MB of screenshots "
          f"({args.episodes * args.screenshots} files; shared pages stored once)")
    if args.perf:
        perf_report(tmp, args)


if __name__ == "__main__":
    sys.exit(main())
