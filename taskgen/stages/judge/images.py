"""Image policies: how screenshots are sent to the judge. A policy is part of the judge config, since it changes
what the model sees. `default` downscales (Pillow) to a 1024-px longest side and re-encodes as WebP; `full` sends
the stored bytes.

Prepared images are kept on disk by (policy, screenshot hash), so a screenshot is decoded and re-encoded once however
often it is judged.
"""
from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from PIL import Image

from taskgen.blobs import blob_path
from taskgen.models import Blob


@dataclass(frozen=True)
class ImagePolicy:
    name: str
    max_side: int | None  # None: send the stored image unchanged
    quality: int = 85


# 1024 px keeps 12-14 px page text readable on a 1280-wide screenshot and halves Gemini's 768-px tiles (2x1, not 2x2).
# WebP at quality 80 keeps text edges clean at about half the bytes of a full-size PNG page and a tenth of a photo's.
POLICIES = {
    "full": ImagePolicy("full", None),
    "default": ImagePolicy("default", 1024, 80),
    "small": ImagePolicy("small", 768, 70),
    "none": ImagePolicy("none", 0),  # no screenshots at all (the rules baseline)
}


def image_policy(name: str) -> ImagePolicy:
    """The policy called `name`; ValueError lists the known ones."""
    if name not in POLICIES:
        raise ValueError(f"unknown image policy {name!r}: use one of {', '.join(POLICIES)}")
    return POLICIES[name]


def _downscaled(data: bytes, policy: ImagePolicy) -> bytes:
    with Image.open(io.BytesIO(data)) as image:
        image.draft("RGB", (policy.max_side, policy.max_side))  # JPEG sources decode at reduced size: cheaper
        rgb = image.convert("RGB")
    rgb.thumbnail((policy.max_side, policy.max_side), Image.Resampling.LANCZOS, reducing_gap=2.0)
    out = io.BytesIO()
    rgb.save(out, format="WEBP", quality=policy.quality, method=2)
    return out.getvalue()


def _cache_path(blob: Blob, policy: ImagePolicy) -> Path:
    return Path(settings.MEDIA_ROOT) / "judge-images" / policy.name / blob.sha256[:2] / f"{blob.sha256}.webp"


def prepared_image(*, blob: Blob, policy: ImagePolicy) -> tuple[bytes, str]:
    """The bytes and MIME type to send for one screenshot under `policy` (made once, then read from disk)."""
    if policy.max_side is None:
        return blob_path(blob).read_bytes(), blob.content_type
    cached = _cache_path(blob, policy)
    if cached.exists():
        return cached.read_bytes(), "image/webp"
    data = _downscaled(blob_path(blob).read_bytes(), policy)
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, cached)  # atomic: two workers preparing the same image never leave half a file
    return data, "image/webp"
