"""The machine's floor under an import: what reading, hashing and storing a run dir's screenshots costs with nothing
else (for bench/import_run.py).

The same files an import reads (every `screenshots/step_N.png` and `final.png`), read whole, hashed (sha256) and,
when new, written into a fresh store under the blob store's own layout (Blob.relative_path_of: temp file, rename, a
folder made when missing), by a bare loop in as many forked processes as the importer's workers: no checks, no JSON,
no database, no Python or Django start. Nearly all of its CPU is the kernel's (reading and writing the bytes, making
the files and folders) and sha256's, so no importer on the same machine and disk can go faster than this; how far a
whole `taskgen import` is from it is the app's own cost.
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
    stored: int


def _screens(folder: str) -> list[str]:
    paths = []
    for sub in ("screenshots", "rows"):
        try:
            with os.scandir(f"{folder}/{sub}") as listing:
                paths += sorted(e.path for e in listing if sub == "screenshots" or e.name.endswith(".png"))
        except FileNotFoundError:
            pass
    return [*paths, f"{folder}/final.png"]


def _store(store: str, data: bytes, relative_path_of) -> bool:
    path = f"{store}/{relative_path_of(hashlib.sha256(data).hexdigest())}"
    if os.path.exists(path):
        return False
    tmp, flags = f"{path}.tmp-{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(tmp, flags, 0o644)
    os.write(fd, data)
    os.close(fd)
    os.replace(tmp, path)
    return True


def _work(folders: list[str], store: str, relative_path_of, pipe: int) -> None:
    files = stored = 0
    for folder in folders:
        for path in _screens(folder):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            data = os.read(fd, os.fstat(fd).st_size + 1)
            os.close(fd)
            files += 1
            stored += _store(store, data, relative_path_of)
    os.write(pipe, f"{files} {stored}".encode())


def import_floor(run_dir: Path, store: Path, processes: int) -> Floor:
    """Read, hash and store every screenshot of run_dir into the fresh folder `store` in `processes` processes."""
    from taskgen.models import Blob

    folders = sorted(e.path for e in os.scandir(run_dir) if e.is_dir())
    started, pids, reads = time.perf_counter(), [], []
    for part in range(processes):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _work(folders[part::processes], str(store), Blob.relative_path_of, write_end)
            os._exit(0)
        os.close(write_end)
        pids.append(pid)
        reads.append(read_end)
    cpu = kernel = 0.0
    files = stored = 0
    for pid, read_end in zip(pids, reads, strict=True):
        counts = os.read(read_end, 64).split()
        os.close(read_end)
        _, _, usage = os.wait4(pid, 0)
        cpu, kernel = cpu + usage.ru_utime + usage.ru_stime, kernel + usage.ru_stime
        files, stored = files + int(counts[0]), stored + int(counts[1])
    return Floor(seconds=time.perf_counter() - started, cpu=cpu, kernel=kernel, files=files, stored=stored)
