"""Image policies: how screenshots are sent to the judge. A policy is part of the judge config, since it changes
what the model sees.

- `full` sends the stored bytes; `medium` and `low` send them too and let Gemini's own `media_resolution` set what an
  image costs (256 or 64 tokens instead of 258 per 768-px tile): no work on this side.
- `small` (768-px longest side, one tile) and `default` (1024 px, the policy of configs made before `medium`) send a
  downscaled WebP, for providers without such a setting. That copy is made once, when the screenshot is stored (the
  import stage, which the harness also goes through: settings.JUDGE_IMAGE_COPIES names the policies), with a cheap
  filter, and kept beside the blob; the judge only reads it. A screenshot stored before its copy was asked for gets
  it made at its first judgment, once.
"""
from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from PIL import Image

from taskgen.blobs import blob_path_of
from taskgen.providers import provider_can


@dataclass(frozen=True)
class ImagePolicy:
    name: str
    max_side: int | None  # None: send the stored image unchanged; 0: send no screenshots
    quality: int = 80
    media_resolution: str | None = None  # Gemini's GenerateContentConfig.media_resolution, when set

    @property
    def resized(self) -> bool:
        return bool(self.max_side)


# 768 px fits one Gemini tile (258 tokens instead of 1,032 for a 1280x800 page) and keeps 12-px text readable; WebP
# keeps text edges clean at a fraction of a PNG's bytes.
POLICIES = {
    "full": ImagePolicy("full", None),
    "medium": ImagePolicy("medium", None, media_resolution="MEDIA_RESOLUTION_MEDIUM"),
    "low": ImagePolicy("low", None, media_resolution="MEDIA_RESOLUTION_LOW"),
    "small": ImagePolicy("small", 768, 70),
    "default": ImagePolicy("default", 1024, 80),
    "none": ImagePolicy("none", 0),  # no screenshots at all (the rules baseline)
}


def image_policy(name: str) -> ImagePolicy:
    """The policy called `name`; ValueError lists the known ones."""
    if name not in POLICIES:
        raise ValueError(f"unknown image policy {name!r}: use one of {', '.join(POLICIES)}")
    return POLICIES[name]


def image_copy_path(sha256: str, policy: ImagePolicy) -> Path:
    """Where the downscaled copy of a stored image under `policy` is kept: beside the blob."""
    blob = blob_path_of(sha256)
    return blob.with_name(f"{blob.name}.{policy.name}.webp")


def downscaled(data: bytes, policy: ImagePolicy) -> bytes:
    """The image at most `policy.max_side` px on its longest side, as WebP: a reduce by an integer factor (a box
    filter, cheap) then BILINEAR, never LANCZOS; JPEG sources decode at reduced size to begin with."""
    side = policy.max_side
    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (side, side))
        rgb = image.convert("RGB")
    rgb.thumbnail((side, side), Image.Resampling.BILINEAR, reducing_gap=1.5)
    out = io.BytesIO()
    rgb.save(out, format="WEBP", quality=policy.quality, method=0)
    return out.getvalue()


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{threading.get_ident()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: two workers making the same copy never leave half a file


def image_copies_wanted() -> tuple[str, ...]:
    """The copies a stored screenshot gets: settings.JUDGE_IMAGE_COPIES when set, else the small copy when the
    judge provider reads screenshots without setting their tokens itself (Gemini's media_resolution)."""
    if settings.JUDGE_IMAGE_COPIES is not None:
        return settings.JUDGE_IMAGE_COPIES
    provider = settings.JUDGE_PROVIDER
    return ("small",) if provider_can(provider, "images") and not provider_can(provider, "media_resolution") else ()


def image_copies_make(*, sha256: str, data: bytes, names: tuple[str, ...] | None = None) -> int:
    """Make the downscaled copies of a stored image that do not exist yet (image_copies_wanted() by default); the
    number made. Called when a screenshot is stored, so judging never decodes an image."""
    wanted = [POLICIES[n] for n in (image_copies_wanted() if names is None else names)]
    made = 0
    for policy in wanted:
        path = image_copy_path(sha256, policy)
        if policy.resized and not path.exists():
            _write(path, downscaled(data, policy))
            made += 1
    return made


def prepared_image(*, sha256: str, content_type: str, policy: ImagePolicy) -> tuple[bytes, str]:
    """The bytes and MIME type to send for one stored image (its blob's hash and type) under `policy` (a resized
    copy is read, not made, unless the screenshot was stored before its policy's copies were asked for)."""
    if not policy.resized:
        return blob_path_of(sha256).read_bytes(), content_type
    path = image_copy_path(sha256, policy)
    try:
        return path.read_bytes(), "image/webp"
    except FileNotFoundError:
        image_copies_make(sha256=sha256, data=blob_path_of(sha256).read_bytes(), names=(policy.name,))
        return path.read_bytes(), "image/webp"
