"""The blob store: images stored once by content hash, checked with Pillow, thumbnails made on first request."""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from django.db import IntegrityError
from PIL import Image

from taskgen.blobs import BlobError, blob_check_image, blob_path, blob_store_image, blob_thumbnail_file, blob_write
from taskgen.models import Blob
from tests.rundirs import png

pytestmark = pytest.mark.django_db


def test_the_same_bytes_are_stored_once():
    first, again = blob_store_image(data=png()), blob_store_image(data=png())
    assert first.pk == again.pk and Blob.objects.count() == 1
    assert blob_path(first).read_bytes() == png()
    assert (first.width, first.height, first.content_type, first.size) == (64, 40, "image/png", len(png()))


@pytest.mark.parametrize("data, reason", [
    (b"hello", "not a readable image"),
    (png()[:-20], "not a readable image"),
    (b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "not a readable image"),
])
def test_what_is_not_an_image_is_refused(data, reason):
    with pytest.raises(BlobError, match=reason):
        blob_store_image(data=data)
    assert not Blob.objects.exists()


def test_an_image_format_a_browser_should_not_get_is_refused():
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="TIFF")
    with pytest.raises(BlobError, match="TIFF images are not accepted"):
        blob_check_image(data=buffer.getvalue())


def test_a_decompression_bomb_is_refused(settings):
    buffer = io.BytesIO()
    Image.new("1", (12000, 12000)).save(buffer, format="PNG")  # 144 Mpx: over Pillow's bomb warning limit
    with pytest.raises(BlobError, match="not a readable image"):
        blob_check_image(data=buffer.getvalue())


def test_an_image_over_the_limit_is_refused(settings):
    settings.BLOB_MAX_BYTES = 1024
    with pytest.raises(BlobError, match="over the 1,024-byte limit"):
        blob_check_image(data=png(size=(300, 300)) + b"\0" * 2000)


def test_the_thumbnail_is_made_on_first_request_and_kept():
    blob = blob_store_image(data=png(size=(1280, 720)))
    assert not blob.has_thumbnail
    path = blob_thumbnail_file(blob=blob)
    with Image.open(path) as thumb:
        assert thumb.format == "WEBP" and max(thumb.size) <= 480
    assert Blob.objects.get(pk=blob.pk).has_thumbnail
    mtime = path.stat().st_mtime_ns
    assert blob_thumbnail_file(blob=Blob.objects.get(pk=blob.pk)) == path and path.stat().st_mtime_ns == mtime


def test_a_missing_blob_file_gives_no_thumbnail():
    blob = blob_store_image(data=png())
    blob_path(blob).unlink()
    with pytest.raises(BlobError, match="missing"):
        blob_thumbnail_file(blob=blob)


@pytest.mark.django_db(transaction=True)
def test_a_second_row_for_the_same_hash_is_refused_by_the_database():
    """The hash's uniqueness is a Meta constraint (migration 0026), not unique=True: the database still enforces it."""
    Blob.objects.create(sha256="a" * 64, size=1)
    with pytest.raises(IntegrityError):
        Blob.objects.create(sha256="a" * 64, size=2)


def test_a_blob_lies_one_folder_below_the_store(settings):
    """blobs/<first two hex digits>/<sha256>: at most 256 folders however many blobs. Under two levels
    (blobs/ab/cd/<sha256>, 65,536 folders) an import into a new store made a folder for nearly every blob it wrote,
    and a folder costs the file system an inode as a file does: half an import's file-system work."""
    written = []
    for n in range(600):
        data = f"content {n}".encode()
        sha256 = hashlib.sha256(data).hexdigest()
        blob_write(sha256=sha256, data=data)
        written.append(sha256)
    store = Path(settings.MEDIA_ROOT) / "blobs"
    assert all((store / sha256[:2] / sha256).read_bytes() == f"content {n}".encode()
               for n, sha256 in enumerate(written))
    folders = [path for path in store.rglob("*") if path.is_dir()]
    assert len(folders) <= 256 and all(folder.parent == store for folder in folders)
