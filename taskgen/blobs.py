"""The blob store: content stored once by sha256, images checked and measured with Pillow, thumbnails made lazily.

Checking an image reads its header and verifies its chunks without decoding the pixels, so importing thousands of
screenshots stays fast; the thumbnail (which needs a full decode) is made on its first request and kept on disk.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from PIL import Image

from taskgen.db_copy import CopyTable, by_copy, ids_reserve
from taskgen.models import Blob
from taskgen.png_check import png_measure

# Formats a browser shows as an image and Pillow reads; anything else is refused (it could be served as active content).
IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
# Pillow's decoders raise many kinds of errors on hostile bytes (struct.error, IndexError, EOFError, ...): the bytes
# come from websites and agents, so any error while reading them means "not a readable image", never a crash.
_PILLOW_ERRORS = (Exception,)
_OBJECT_ADDRESS = re.compile(r" <[\w.]+ object at 0x[0-9a-f]+>")


class BlobError(ValueError):
    """The content cannot be stored: not an image, or over the size limit."""


@dataclass(frozen=True)
class CheckedImage:
    """An image's bytes that passed the checks, with what the Blob row records about them."""

    sha256: str
    size: int
    content_type: str
    width: int
    height: int


def blob_path(blob: Blob) -> Path:
    return blob_path_of(blob.sha256)


def blob_path_of(sha256: str) -> Path:
    """The stored file of the blob with this content hash."""
    return Path(blob_file_of(sha256))


def blob_file_of(sha256: str) -> str:
    """blob_path_of as a plain string, for code that handles tens of thousands of blobs (an export): Python 3.11's
    pathlib interns every part of every path it parses, so each blob's name, once in a Path, stays in memory for
    the life of the process (7 MB at the reference's export budget)."""
    return f"{settings.MEDIA_ROOT}/{Blob.relative_path_of(sha256)}"


def thumbnail_path(blob: Blob) -> Path:
    return Path(settings.MEDIA_ROOT) / blob.thumbnail_relative_path


def blob_check_image(*, data: bytes, sha256: str | None = None) -> CheckedImage:
    """Check bytes are one readable image within the size limit (header and chunk checksums, no pixel decode).

    `sha256` saves hashing again when the caller has hashed the bytes already.
    """
    if len(data) > settings.BLOB_MAX_BYTES:
        raise BlobError(f"{len(data):,} bytes is over the {settings.BLOB_MAX_BYTES:,}-byte limit")
    measured = png_measure(data)  # most screenshots: a plain PNG, accepted without Pillow's objects
    image_format, (width, height) = ("PNG", measured) if measured is not None else _pillow_measure(data)
    if image_format not in IMAGE_FORMATS:
        raise BlobError(f"{image_format} images are not accepted (only {', '.join(IMAGE_FORMATS)})")
    return CheckedImage(sha256=sha256 or hashlib.sha256(data).hexdigest(), size=len(data),
                        content_type=IMAGE_FORMATS[image_format], width=width, height=height)


def _pillow_measure(data: bytes) -> tuple[str, tuple[int, int]]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as probe:
                image_format, size = probe.format, probe.size
                probe.verify()  # catches truncated and corrupt files that open() alone accepts
    except _PILLOW_ERRORS as exc:  # without the buffer's address Pillow names: the same bytes, the same reason
        reason = _OBJECT_ADDRESS.sub("", str(exc))
        raise BlobError(f"not a readable image ({type(exc).__name__}: {reason})") from exc
    return image_format, size


def _write_atomically(path: Path | str, data: bytes) -> None:
    """Write beside the target, then rename: a reader never sees half a file (names are per process and thread)."""
    folder, name = os.path.split(path)
    tmp = f"{folder}/.tmp-{name}-{os.getpid()}-{threading.get_ident()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:  # the first blob of its prefix: make the folder (cheaper than a mkdir every time)
        _folder_make(folder)
        fd = os.open(tmp, flags, 0o644)
    try:
        view, written = memoryview(data), 0
        while written < len(data):
            written += os.write(fd, view[written:])
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _folder_make(folder: str) -> None:
    """Make a store folder (at most 256 of them: Blob.relative_path_of): one mkdir when its parent exists, where
    os.makedirs first asks the disk whether the parent exists."""
    try:
        os.mkdir(folder)
    except FileNotFoundError:  # its parent is new too (the rare case: makedirs's way)
        os.makedirs(folder, exist_ok=True)
    except FileExistsError:  # another worker made it just now
        pass


def blob_write(*, sha256: str, data: bytes) -> None:
    """Put the bytes in the store under their hash unless they are there already (safe to repeat, safe to race)."""
    path = blob_file_of(sha256)  # a string: an import asks this for every screenshot it reads
    if not os.path.exists(path):
        _write_atomically(path, data)


def _rows_for(images: Iterable[CheckedImage]) -> list[Blob]:
    return [Blob(sha256=i.sha256, size=i.size, content_type=i.content_type, width=i.width, height=i.height)
            for i in images]


def _rows_create(images: list[CheckedImage]) -> dict[str, int]:
    """New blob rows in one statement (COPY on PostgreSQL, the ORM elsewhere: the same rows); sha -> Blob id."""
    if not by_copy():
        created = Blob.objects.bulk_create(_rows_for(images))
        return {b.sha256: b.pk for b in created} if all(b.pk for b in created) else {}
    ids = ids_reserve(Blob, len(images))
    CopyTable(Blob, with_pk=True).write(
        {"id": blob_id, "sha256": i.sha256, "size": i.size, "content_type": i.content_type, "width": i.width,
         "height": i.height} for blob_id, i in zip(ids, images, strict=True))
    return {i.sha256: blob_id for blob_id, i in zip(ids, images, strict=True)}


def blob_rows_ensure(*, images: Iterable[CheckedImage]) -> dict[str, int]:
    """Blob rows for checked images whose files are written, created where missing; sha -> Blob id."""
    # In sha order, whatever the episodes': two imports whose batches meet the same screenshots then take the rows'
    # locks in one order and never wait on each other in a cycle (PostgreSQL would end it by failing one: a deadlock).
    wanted = {image.sha256: image for image in sorted(images, key=lambda image: image.sha256)}
    if not wanted:
        return {}
    try:
        with transaction.atomic():  # a savepoint: new content (the common case) is one statement
            created = _rows_create(list(wanted.values()))
        if created:
            return created
    except IntegrityError:
        pass  # some are stored already (by an earlier import, or by another import just now)
    Blob.objects.bulk_create(_rows_for(wanted.values()), ignore_conflicts=True)
    return dict(Blob.objects.filter(sha256__in=wanted).values_list("sha256", "id"))


def blob_store_image(*, data: bytes) -> Blob:
    """Store image bytes once by content hash (checked with Pillow) and return their Blob row."""
    checked = blob_check_image(data=data)
    blob_write(sha256=checked.sha256, data=data)
    blob_id = blob_rows_ensure(images=[checked])[checked.sha256]
    return Blob.objects.get(pk=blob_id)


def blob_thumbnail_file(*, blob: Blob) -> Path:
    """The blob's thumbnail file, made from the image on first request and kept; BlobError if it cannot be decoded."""
    path = thumbnail_path(blob)
    if path.exists():
        return path
    try:
        with Image.open(blob_path(blob)) as image:
            thumb = image.convert("RGB")
    except FileNotFoundError as exc:
        raise BlobError("the blob's file is missing from the store") from exc
    except _PILLOW_ERRORS as exc:
        raise BlobError(f"the image cannot be decoded ({type(exc).__name__})") from exc
    side = settings.THUMBNAIL_SIZE
    thumb.thumbnail((side, side * 2))
    buffer = io.BytesIO()
    thumb.save(buffer, format="WEBP", quality=70)
    _write_atomically(path, buffer.getvalue())
    if not blob.has_thumbnail:
        Blob.objects.filter(pk=blob.pk).update(has_thumbnail=True)
    return path
