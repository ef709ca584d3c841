"""The fast PNG check only ever accepts what Pillow's open() and verify() accept, with the same size."""
from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from taskgen.png_check import png_measure
from tests.rundirs import png


def _pillow(data: bytes) -> tuple[int, int] | None:
    try:
        with Image.open(io.BytesIO(data)) as probe:
            size = probe.size
            probe.verify()
            return size
    except Exception:  # noqa: BLE001 - any refusal is "not accepted"
        return None


def _chunk(name: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + name + body + struct.pack(">I", zlib.crc32(name + body))


def _with_chunk(data: bytes, name: bytes, body: bytes) -> bytes:
    return data[:33] + _chunk(name, body) + data[33:]  # after IHDR


def _saved(mode: str, size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("data", [
    png(), png(size=(1, 1)), png(size=(1280, 720)), _saved("RGBA", (9, 4)), _saved("L", (3, 30)), _saved("1", (17, 2)),
    _saved("I;16", (5, 5)), _with_chunk(png(), b"tEXt", b"Comment\0hello"), _with_chunk(png(), b"sRGB", b"\0"),
    _with_chunk(png(), b"prVt", b"private data"),
])
def test_a_plain_png_is_measured_as_pillow_measures_it(data):
    assert png_measure(data) == _pillow(data) is not None


@pytest.mark.parametrize("data", [
    _saved("P", (4, 4)),  # a palette: Pillow reads it, so Pillow decides
    _with_chunk(png(), b"iCCP", b"profile\0\0not zlib"),
    _with_chunk(png(), b"gAMA", b"\0"),  # too short: Pillow's refusal, in Pillow's words
    _with_chunk(png(), b"ab!d", b""),
    png()[:8] + png()[33:],  # no IHDR
    b"GIF89a" + png()[6:],
])
def test_what_it_does_not_follow_goes_to_pillow(data):
    assert png_measure(data) is None


def test_a_size_over_the_decompression_bomb_limit_goes_to_pillow(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 64 * 40 - 1)
    assert png_measure(png()) is None


def test_no_cut_or_flipped_byte_is_accepted_unless_pillow_accepts_it_the_same():
    data = _with_chunk(png(size=(6, 5)), b"tEXt", b"k\0v")
    for length in range(len(data)):
        assert png_measure(data[:length]) in (None, _pillow(data[:length]))
    for pos in range(len(data)):
        for bit in (1, 16, 128):
            spoilt = data[:pos] + bytes([data[pos] ^ bit]) + data[pos + 1:]
            measured = png_measure(spoilt)
            assert measured is None or measured == _pillow(spoilt), (pos, bit)
