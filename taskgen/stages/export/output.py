"""Writing an export: the rows folder `<out>/<task_id>/{rows.jsonl, step_*.png, episode.json}` with _report.json and
_manifest.json, and the same files as a .tar.gz streamed chunk by chunk (memory stays flat however big the export).

rows.jsonl and episode.json are the episode's stored text exactly; images are the stored row-image blobs. File paths
below a folder are plain strings, not Paths: Python 3.11's pathlib interns every part of every path it parses, and
an export names tens of thousands of blobs and folders once each.
"""
from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from taskgen.blobs import blob_file_of, blob_path
from taskgen.models import Blob, Episode, Export
from taskgen.names import PLAIN_NAME_RULE, is_plain_name
from taskgen.stages.export.select import (
    CERTIFICATE_FILE,
    ExportError,
    certificate_bytes,
    manifest_bytes,
    manifest_write,
    report_bytes,
)

BATCH = 100  # episodes loaded at a time: their rows text is the big part
COPY_BUFFER = 1 << 20
GZIP_LEVEL = 1


def safe_name(name: str) -> str:
    """A file or folder name from imported data, refused when it could climb out of the export folder."""
    if not is_plain_name(name):
        raise ExportError(f"{name[:80]!r} is not a safe file name for an export ({PLAIN_NAME_RULE})")
    return name


@dataclass(frozen=True)
class EpisodeFiles:
    """One exported episode: its folder name and its files as (file name, bytes or the blob's file path)."""

    task_id: str
    files: list[tuple[str, bytes | str]]


def export_episodes(entries: list[dict]) -> Iterator[EpisodeFiles]:
    """The manifest's episodes in its order, a batch at a time: rows.jsonl and episode.json are the episodes' stored
    text, the row images the blobs the manifest names (no model instance per screenshot)."""
    for start in range(0, len(entries), BATCH):
        chunk = entries[start:start + BATCH]
        texts = {row["id"]: row for row in Episode.objects.filter(pk__in=[e["episode_id"] for e in chunk])
                 .values("id", "rows_jsonl", "episode_json")}
        for entry in chunk:
            row = texts.get(entry["episode_id"])
            if row is None:
                raise ExportError(f"episode {entry['episode_id']} was deleted after the export was selected")
            yield EpisodeFiles(entry["task_id"], episode_files(row, entry["images"]))


def episode_files(row: dict, images: list[list[str]]) -> list[tuple[str, bytes | str]]:
    """(file name, bytes or the blob's file path) of one episode's rows folder, from its stored text and its
    [name, sha256] row images."""
    files: list[tuple[str, bytes | str]] = [("rows.jsonl", row["rows_jsonl"].encode("utf-8"))]
    files += [(safe_name(name), blob_file_of(sha256)) for name, sha256 in images]
    if row["episode_json"]:  # an episode imported without episode.json gets none, as the reference copies
        files.append(("episode.json", row["episode_json"].encode("utf-8")))
    return files


def _copy(source: str, target: str) -> None:
    try:
        shutil.copyfile(source, target)  # the kernel copies (sendfile): fast and light on the CPU
    except shutil.SpecialFileError:
        # shutil.copyfile refuses anything but regular files (a blob store on a pipe or device): copy by hand.
        with open(source, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, COPY_BUFFER)


def episode_write_dir(*, episode: EpisodeFiles, out: Path) -> bool:
    """Write one episode's folder (all files, then one rename, so a folder that exists is complete); False when it
    was already there (a resumed export writes only what is missing)."""
    name = safe_name(episode.task_id)
    target = os.path.join(out, name)
    if os.path.isdir(target):
        return False
    partial = os.path.join(out, f".partial-{name}")
    shutil.rmtree(partial, ignore_errors=True)
    os.mkdir(partial)
    for file_name, content in episode.files:
        if isinstance(content, bytes):
            with open(os.path.join(partial, file_name), "wb") as handle:
                handle.write(content)
        else:
            _copy(content, os.path.join(partial, file_name))
    os.rename(partial, target)
    return True


@dataclass
class WriteOutcome:
    written: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    manifest_sha256: str = ""  # of the _manifest.json written, once the folder is complete

    @property
    def complete(self) -> bool:
        return not self.errors


def export_write_dir(*, manifest: dict, out: Path, workers: int | None = None) -> WriteOutcome:
    """Write every episode of the manifest under `out`, settings.EXPORT_BATCH at a time as the export stage does
    (`episodes_write`), then _report.json and _manifest.json once all are there; an episode that fails is reported
    and the others go on."""
    outcome = WriteOutcome()
    entries = manifest["episodes"]
    for start in range(0, len(entries), settings.EXPORT_BATCH):
        written = episodes_write(entries=entries[start:start + settings.EXPORT_BATCH], out=out, workers=workers)
        for task_id, result in written.items():
            if isinstance(result, Exception):
                outcome.errors.append(f"{task_id}: {result}")
            else:
                outcome.written += result
                outcome.skipped += not result
    if outcome.complete:
        (out / "_report.json").write_bytes(report_bytes(manifest["report"]))
        certificate_write(manifest, out)
        outcome.manifest_sha256 = manifest_write(manifest, out / "_manifest.json")
    return outcome


def certificate_write(manifest: dict, out: Path) -> None:
    """_certificate.json beside _report.json when the export was gated by a certificate."""
    if (certificate := certificate_bytes(manifest)) is not None:
        (out / CERTIFICATE_FILE).write_bytes(certificate)


def episodes_write(*, entries: list[dict], out: Path, workers: int | None = None) -> dict[str, bool | Exception]:
    """Write these manifest entries' folders under `out` (their text read in one query, the files by `workers`
    threads): per task id, True when written, False when it was there already, or the error that stopped it (an
    episode deleted since the selection fails alone)."""
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or settings.EXPORT_WORKERS
    outcomes: dict[str, bool | Exception] = {}
    with _InlinePool() if workers == 1 else ThreadPoolExecutor(workers, thread_name_prefix="export") as pool:
        futures = {pool.submit(episode_write_dir, episode=episode, out=out): episode.task_id
                   for episode in _episodes_each_found(entries, outcomes)}
        for future, task_id in futures.items():
            try:
                outcomes[task_id] = future.result()
            except (OSError, ExportError) as exc:
                outcomes[task_id] = exc
    return outcomes


def _episodes_each_found(entries: list[dict], outcomes: dict[str, bool | Exception]) -> Iterator[EpisodeFiles]:
    """export_episodes over all the entries; when one is missing, the others one by one (its error in outcomes)."""
    try:
        yield from export_episodes(entries)
        return
    except ExportError:
        pass
    for entry in entries:
        try:
            yield from export_episodes([entry])
        except ExportError as exc:
            outcomes[entry["task_id"]] = exc


class _InlinePool:
    """One writer: each episode is written on the calling thread, with no hand-off between threads per episode."""

    def submit(self, fn: Callable[..., bool], /, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(**kwargs))
        except Exception as exc:  # noqa: BLE001 - reported per episode by _collect, as a thread pool's future would
            future.set_exception(exc)
        return future

    def __enter__(self) -> _InlinePool:
        return self

    def __exit__(self, *exc_info) -> None:
        return None


class _ChunkSink:
    """A write-only file for tarfile whose contents are taken out after each member: the stream never piles up."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def _add(tar: tarfile.TarFile, arcname: str, content: bytes | str, mtime: int) -> None:
    info = tarfile.TarInfo(arcname)
    info.mtime = mtime
    info.mode = 0o644
    if isinstance(content, bytes):
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
        return
    info.size = os.stat(content).st_size
    with open(content, "rb") as handle:
        tar.addfile(info, handle)


def export_stream_targz(*, export: Export) -> Iterator[bytes]:
    """The export as a .tar.gz (folder `export-<id>/`), yielded a member at a time, episodes read a batch at a time."""
    top, mtime = f"export-{export.pk}", int(export.created_at.timestamp())
    sink = _ChunkSink()
    # A tar stream ("w|") through our own gzip writer: Python 3.11's "w|gz" always compresses at level 9, which on
    # PNGs (already compressed) costs several times the time of level 1 for almost no smaller file.
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=GZIP_LEVEL, mtime=mtime)
    with gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        _add(tar, f"{top}/_report.json", report_bytes(export.report), mtime)
        _add(tar, f"{top}/_manifest.json", manifest_bytes(export.manifest), mtime)
        if (certificate := certificate_bytes(export.manifest)) is not None:
            _add(tar, f"{top}/{CERTIFICATE_FILE}", certificate, mtime)
        yield sink.drain()
        for episode in export_episodes(export.manifest["episodes"]):
            folder = f"{top}/{safe_name(episode.task_id)}"
            for file_name, content in episode.files:
                _add(tar, f"{folder}/{file_name}", content, mtime)
                chunk = sink.drain()
                if chunk:
                    yield chunk
    yield sink.drain()


def export_missing_files(*, export: Export) -> list[str]:
    """Row images of the export whose blob file is gone (checked before a download starts, since a stream that
    breaks halfway cannot say why)."""
    shas = {sha for e in export.manifest.get("episodes", []) for _, sha in e.get("images", [])}
    missing = []
    for blob in Blob.objects.filter(sha256__in=shas).only("sha256").iterator(chunk_size=2000):
        if not blob_path(blob).exists():
            missing.append(blob.sha256)
    return missing + sorted(shas - set(Blob.objects.filter(sha256__in=shas).values_list("sha256", flat=True)))
