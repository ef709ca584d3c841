"""Reading a run dir's files defensively: plain task ids, no symlink out of the folder, no special files, size limits,
JSON that parses. Every refusal is a `FileSkipped` whose message says why, for the import summary."""
from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from taskgen.names import NotPlainName, plain_name_check

# A task id names a folder: the plain-name rule of taskgen/names.py.


@dataclass(frozen=True)
class Skip:
    """One file or folder the import left out, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ImportFailed(ValueError):
    """Nothing can be imported from this run dir (it is missing, or it has no readable tasks file)."""


class FileSkipped(Exception):
    """This file (or folder) cannot be imported; the message is the reason shown to the researcher."""


def check_plain_name(value: object) -> str:
    """A task id read from a file, skipped (FileSkipped) when it is not a plain name (taskgen/names.py)."""
    try:
        return plain_name_check(value, what="task id")
    except NotPlainName as exc:
        raise FileSkipped(str(exc)) from exc


def inside(path: Path, root: Path, *, parent_resolved: Path | None = None) -> Path:
    """The resolved path, refused when it (through a symlink) leads out of root. `parent_resolved`: the path's folder
    resolved already (a caller walking down from it), so a path that is no symlink costs one lstat, not a resolve."""
    if parent_resolved is not None and path.name not in ("", ".", ".."):
        with contextlib.suppress(OSError):  # whatever lstat cannot say, resolve() says below
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                return _within(parent_resolved / path.name, root)
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise FileSkipped(f"path cannot be resolved ({exc})") from exc
    return _within(resolved, root)


def _within(resolved: Path, root: Path) -> Path:
    if not resolved.is_relative_to(root):
        raise FileSkipped(f"symlink leads out of {root.name}/ (to {resolved})")
    return resolved


class FileMissing(FileSkipped):
    """There is no such file (a reader of optional files passes over it)."""


def read_bytes(path: Path, *, root: Path, limit: int) -> bytes:
    """A regular file's bytes, if it is not over limit bytes and, when it is a symlink, it stays inside root.

    The caller has checked the folder holding it (one resolve per folder, not per file: imports read many files).
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError as exc:  # the path itself: a symlink to nothing is a file that cannot be read
        raise FileMissing(f"cannot be read ({exc.strerror or exc})") from exc
    except OSError as exc:
        raise FileSkipped(f"cannot be read ({exc.strerror or exc})") from exc
    try:
        if stat.S_ISLNK(info.st_mode):
            info = inside(path, root).stat()
    except OSError as exc:
        raise FileSkipped(f"cannot be read ({exc.strerror or exc})") from exc
    _readable_check(info, limit)
    try:
        return _read_whole(path, info.st_size)
    except OSError as exc:
        raise FileSkipped(f"cannot be read ({exc.strerror or exc})") from exc


def _readable_check(info: os.stat_result, limit: int) -> None:
    """What an import reads: a regular file (a FIFO or device would hang or flood it) of at most `limit` bytes."""
    if not stat.S_ISREG(info.st_mode):
        raise FileSkipped("not a regular file")
    if info.st_size > limit:
        raise FileSkipped(f"{info.st_size:,} bytes is over the {limit:,}-byte limit")


def read_listed(entry: os.DirEntry, *, root: Path, limit: int) -> bytes:
    """read_bytes for a file a folder's listing named (os.scandir): when the listing says it is a regular file and
    no symlink, it is opened without following a link or blocking and checked by its descriptor, without a look-up
    by path first (an import reads tens of thousands of screenshots); anything else, or a file that changed since
    the listing, goes to read_bytes, whose checks and reasons stand."""
    if not entry.is_file(follow_symlinks=False):
        return read_bytes(Path(entry.path), root=root, limit=limit)
    try:
        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # gone, or a symlink now (O_NOFOLLOW): read_bytes says what it is
        return read_bytes(Path(entry.path), root=root, limit=limit)
    try:
        info = os.fstat(fd)
        _readable_check(info, limit)  # replaced by a FIFO since the listing: O_NONBLOCK kept the open from hanging
        return _read_fd(fd, info.st_size)
    except OSError as exc:
        raise FileSkipped(f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)


def _read_whole(path: Path, size: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _read_fd(fd, size)
    finally:
        os.close(fd)


def _read_fd(fd: int, size: int) -> bytes:
    """The file's bytes to its end: one read when it is still `size` long (asked for one byte more, it answers
    `size` only at the end), more when it changed since."""
    data = os.read(fd, size + 1)
    if len(data) == size:
        return data
    chunks = [data]
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def decode_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileSkipped(f"not UTF-8 text (byte {exc.start})") from exc


def _no_constant(name: str) -> None:
    return None  # NaN and Infinity: PostgreSQL's JSON cannot hold them; null keeps the rest of the record


def parse_json(text: str) -> object:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        cut_short = exc.msg.startswith("Unterminated") or exc.pos >= len(text.rstrip())
        raise FileSkipped(f"{'truncated' if cut_short else 'invalid'} JSON ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # a number too long to read, or nesting too deep
        raise FileSkipped(f"invalid JSON ({str(exc)[:120] or type(exc).__name__})") from exc


def read_json_object(path: Path, *, root: Path) -> dict:
    """A JSON file that must hold one object."""
    value = parse_json(decode_text(read_bytes(path, root=root, limit=settings.JSON_MAX_BYTES)))
    if not isinstance(value, dict):
        raise FileSkipped(f"holds JSON {type(value).__name__}, not an object")
    return value


def jsonl_lines(text: str) -> list[tuple[int, str]]:
    """(line number from 1, line) for each non-blank line."""
    return [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]


def check_jsonl(text: str) -> int:
    """The number of rows in a JSON-lines text; FileSkipped naming the first line that is not a JSON object."""
    lines = jsonl_lines(text)
    for number, line in lines:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise FileSkipped(f"line {number} is not JSON ({str(exc)[:120]})") from exc
        if not isinstance(value, dict):
            raise FileSkipped(f"line {number} is not a JSON object")
    return len(lines)


def parsed_without_nul(text: str, value):
    """`value`, parsed from the JSON `text`, with NUL characters replaced (without_nul); walked only when the text
    holds a \\u0000 escape, the one way JSON can carry a NUL (json.loads refuses raw control characters)."""
    return without_nul(value) if "\\u0000" in text else value


def without_nul(value):
    """The value with NUL characters replaced: PostgreSQL cannot store them in text or JSON, and they carry nothing."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value
