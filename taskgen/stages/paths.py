"""Paths given from a browser or the command line: only folders under settings.DATA_ROOT are read or written."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings


class PathError(ValueError):
    """A path the app will not use, with the reason in words a researcher can act on."""


def data_root() -> Path:
    return Path(settings.DATA_ROOT).resolve()


def path_under_data_root(*, raw: str | Path, base: Path | None = None) -> Path:
    """The path resolved (symlinks followed) and checked to lie under the data root; relative paths start at `base`
    (the data root when not given)."""
    text = str(raw).strip()
    if not text or "\x00" in text:
        raise PathError("give a folder path")
    root = data_root()
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = (base or root) / path
    resolved = path.resolve()  # follows symlinks, so a link pointing outside the root is caught
    if not resolved.is_relative_to(root):
        raise PathError(f"{text} is outside the data root {root} (set TASKGEN_DATA_ROOT to allow another folder)")
    return resolved


def existing_dir_under_data_root(*, raw: str | Path, base: Path | None = None) -> Path:
    """A folder that must exist under the data root (a run dir to import)."""
    path = path_under_data_root(raw=raw, base=base)
    if not path.is_dir():
        raise PathError(f"{raw} is not a folder under the data root")
    return path


def existing_file_under_data_root(*, raw: str | Path, base: Path | None = None) -> Path:
    """A file that must exist under the data root (a tasks.jsonl)."""
    path = path_under_data_root(raw=raw, base=base)
    if not path.is_file():
        raise PathError(f"{raw} is not a file under the data root")
    return path


def empty_dir_under_data_root(*, raw: str | Path, base: Path | None = None) -> Path:
    """A folder to write into: under the data root, and missing or empty (an export never mixes with old files)."""
    path = path_under_data_root(raw=raw, base=base)
    if path.exists() and not path.is_dir():
        raise PathError(f"{raw} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        raise PathError(f"{raw} exists and is not empty: choose a new folder so old rows cannot mix with this export")
    return path
