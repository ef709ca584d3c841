"""A fast way to accept a plain PNG: walk its chunks and check their CRCs, as Pillow's open() and verify() do, without
Pillow's objects (a third of an imported screenshot's check).

It only ever says yes: a PNG it measures is one Pillow accepts too, with the same size. Anything it does not follow
(a chunk Pillow would parse, other than IHDR and the simple ones below; an animated PNG; a size over Pillow's
decompression-bomb limit; a bad checksum; bytes cut short) gets None, and the caller asks Pillow, whose verdict and
reason stand.
"""
from __future__ import annotations

import re
import zlib

from PIL import Image, PngImagePlugin

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHUNK_ID = re.compile(rb"\w\w\w\w")  # what Pillow takes for a chunk's name
# Chunks before the image data that Pillow reads and could refuse only when shorter than this (its handlers'
# "Truncated ... chunk"); any other chunk it has a handler for sends the image to Pillow.
_SIMPLE_MIN_LENGTH = {b"sRGB": 1, b"gAMA": 4, b"pHYs": 9, b"cHRM": 32, b"tEXt": 0}


def _chunk(data: bytes, pos: int) -> tuple[bytes, int, int] | None:
    """(name, start of its data, end of its data) of the chunk at pos, None when cut short or badly named."""
    if pos + 8 > len(data):
        return None
    length, name = int.from_bytes(data[pos:pos + 4], "big"), data[pos + 4:pos + 8]
    start = pos + 8
    if not _CHUNK_ID.fullmatch(name) or start + length + 4 > len(data):
        return None
    return name, start, start + length


def _crc_ok(data: bytes, name_at: int, end: int) -> bool:
    view = memoryview(data)
    return zlib.crc32(view[name_at:end]) == int.from_bytes(data[end:end + 4], "big")


def _header(data: bytes) -> tuple[int, int] | None:
    """IHDR first, 13 bytes, a colour type and depth Pillow reads, filter method 0, a size within its limits."""
    chunk = _chunk(data, 8)
    if chunk is None or chunk[0] != b"IHDR" or chunk[2] - chunk[1] != 13 or not _crc_ok(data, 12, chunk[2]):
        return None
    ihdr = data[chunk[1]:chunk[2]]
    width, height = int.from_bytes(ihdr[0:4], "big"), int.from_bytes(ihdr[4:8], "big")
    limit = Image.MAX_IMAGE_PIXELS
    if (ihdr[8], ihdr[9]) not in PngImagePlugin._MODES or ihdr[11] or not width or not height:
        return None
    if limit is not None and width * height > limit:
        return None  # Pillow's decompression-bomb warning (an error to the caller), said by Pillow
    return width, height


def png_measure(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG whose chunks all check (Pillow's open and verify, without Pillow), else None."""
    if not data.startswith(SIGNATURE):
        return None
    size = _header(data)
    if size is None:
        return None
    pos, seen_data, text = 8 + 8 + 13 + 4, False, 0
    while True:
        chunk = _chunk(data, pos)
        if chunk is None:
            return None
        name, start, end = chunk
        if name == b"IEND":
            return size if seen_data else None  # Pillow reads no checksum of IEND
        if name == b"IDAT":
            seen_data = True
        elif not seen_data and not _simple(name, end - start):
            return None
        text += end - start if name == b"tEXt" else 0
        if text > PngImagePlugin.MAX_TEXT_MEMORY or not _crc_ok(data, start - 4, end):
            return None
        pos = end + 4


def _simple(name: bytes, length: int) -> bool:
    """A chunk before the image data that Pillow either skips or reads without refusing it."""
    if name in _SIMPLE_MIN_LENGTH:
        return length >= _SIMPLE_MIN_LENGTH[name]
    return name != b"IHDR" and not hasattr(PngImagePlugin.PngStream, f"chunk_{name.decode('ascii')}")
