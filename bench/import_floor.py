"""The machine's floor under an import: what reading, hashing and storing a run dir's screenshots costs with nothing
else (for bench/import_run.py).

The images an import reads (`screenshots/*`, `rows/*.png`, `final.png`), read whole, hashed (sha256) and, when new,
written by the blob store's own write (taskgen.blobs.blob_write, into a fresh store) by a bare loop in as many
forked processes as the importer's workers: no checks, no JSON, no database, no Python or Django start. Nearly all
of its CPU is the kernel's (reading and writing the bytes, making the files and folders) and sha256's, so no
importer on the same machine and disk can go faster than this; how far a whole `taskgen import` is from it is the
app's own cost.

`packed=True` measures the same loop with the new blobs appended to one file per process instead of a file each
(the blob store as it is makes a file per new screenshot): what the floor would be for a store that packed its
blobs. Each process keeps its own set of the hashes it stored, so a blob both processes meet is written twice.
"""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Floor:
    seconds: float
    cpu: float
    kernel: float
    files: int
    stored: int  # files in the store (a packed store: its packs)
    stored_bytes: int


def _screens(folder: str) -> list[str]:
    paths = []
    for sub in ("screenshots", "rows"):
        try:
            with os.scandir(f"{folder}/{sub}") as listing:
                paths += sorted(e.path for e in listing if sub == "screenshots" or e.name.endswith(".png"))
        except FileNotFoundError:
            pass
    return [*paths, f"{folder}/final.png"]


def _packer(store: str):
    """A write appending each new blob to one file of this process's (what a packing store would do), and the file."""
    os.makedirs(store, exist_ok=True)
    pack = os.open(f"{store}/pack-{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    seen: set[str] = set()

    def write(*, sha256: str, data: bytes) -> None:
        if sha256 not in seen:
            seen.add(sha256)
            os.write(pack, data)

    return write, pack


def _work(folders: list[str], store: str, pipe: int, packed: bool) -> None:
    """One forked process's share: its store is `store` (settings changed in this process only)."""
    from django.conf import settings

    from taskgen.blobs import blob_write

    settings.MEDIA_ROOT = store
    write, pack = _packer(store) if packed else (blob_write, None)
    files = 0
    for folder in folders:
        for path in _screens(folder):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            data = os.read(fd, os.fstat(fd).st_size + 1)
            os.close(fd)
            files += 1
            write(sha256=hashlib.sha256(data).hexdigest(), data=data)
    if pack is not None:
        os.close(pack)
    os.write(pipe, str(files).encode())


def import_floor(run_dir: Path, store: Path, processes: int, *, packed: bool = False) -> Floor:
    """Read, hash and store every screenshot of run_dir into the fresh folder `store` in `processes` processes
    (packed: appended to one file per process)."""
    folders = sorted(e.path for e in os.scandir(run_dir) if e.is_dir())
    started, pids, reads = time.perf_counter(), [], []
    for part in range(processes):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _work(folders[part::processes], str(store), write_end, packed)
            os._exit(0)
        os.close(write_end)
        pids.append(pid)
        reads.append(read_end)
    cpu = kernel = 0.0
    files = 0
    for pid, read_end in zip(pids, reads, strict=True):
        files += int(os.read(read_end, 64))
        os.close(read_end)
        _, _, usage = os.wait4(pid, 0)
        cpu, kernel = cpu + usage.ru_utime + usage.ru_stime, kernel + usage.ru_stime
    seconds = time.perf_counter() - started
    # counted after the clock (blob_write says nothing): the files in the store and their bytes
    sizes = [os.path.getsize(f"{folder}/{name}") for folder, _, names in os.walk(store) for name in names]
    return Floor(seconds=seconds, cpu=cpu, kernel=kernel, files=files, stored=len(sizes), stored_bytes=sum(sizes))
