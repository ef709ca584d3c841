"""The blob store: content stored once by sha256, images checked and measured with Pillow, thumbnails made once."""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
from pathlib import Path

from django.conf import settings
from PIL import Image, UnidentifiedImageError

from taskgen.models import Blob


class BlobError(ValueError):
    """The content cannot be stored: not an image, or over the size limit."""


def blob_path(blob: Blob) -> Path:
    return Path(settings.MEDIA_ROOT) / blob.relative_path


def thumbnail_path(blob: Blob) -> Path:
    return Path(settings.MEDIA_ROOT) / blob.thumbnail_relative_path


def _measure_image(data: bytes) -> tuple[str, int, int, Image.Image]:
    try:
        with Image.open(io.BytesIO(data)) as probe:
            probe.verify()  # catches truncated and corrupt files that open() alone accepts
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise BlobError(f"not a readable image ({type(exc).__name__}: {exc})") from exc
    content_type = Image.MIME.get(image.format or "", "application/octet-stream")
    return content_type, image.width, image.height, image


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _write_thumbnail(image: Image.Image, path: Path) -> None:
    side = settings.THUMBNAIL_SIZE
    thumb = image.convert("RGB")
    thumb.thumbnail((side, side * 2))
    buffer = io.BytesIO()
    thumb.save(buffer, format="WEBP", quality=70)
    _write_atomically(path, buffer.getvalue())


def blob_store_image(*, data: bytes) -> Blob:
    """Store image bytes once by content hash (checked with Pillow, thumbnail made) and return their Blob row."""
    if len(data) > settings.BLOB_MAX_BYTES:
        raise BlobError(f"{len(data):,} bytes is over the {settings.BLOB_MAX_BYTES:,}-byte limit")
    sha = hashlib.sha256(data).hexdigest()
    existing = Blob.objects.filter(sha256=sha).first()
    if existing is not None and blob_path(existing).exists():
        return existing
    content_type, width, height, image = _measure_image(data)
    blob = existing or Blob(sha256=sha, size=len(data), content_type=content_type, width=width, height=height)
    _write_atomically(blob_path(blob), data)
    _write_thumbnail(image, thumbnail_path(blob))
    blob.has_thumbnail = True
    if existing is None:
        blob, _ = Blob.objects.get_or_create(
            sha256=sha,
            defaults={"size": len(data), "content_type": content_type, "width": width, "height": height,
                      "has_thumbnail": True},
        )
    return blob
