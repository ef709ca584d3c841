"""Versioned prompt template files, one reader for every model role (judge, proposer, agent).

Format: `#` comment lines, a `version: NAME` line, then named sections, each opened by a line `=== NAME ===`. A role
says which sections it needs; the text of each section is kept as written (callers fold lines where they want)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

_SECTION = re.compile(r"^=== ([a-z_]+) ===[ \t]*$", re.MULTILINE)
_VERSION = re.compile(r"^version:\s*(\S+)\s*$", re.MULTILINE)


class PromptFileError(ValueError):
    """The prompt file is missing, or lacks its version or a section its role needs."""


@dataclass(frozen=True)
class PromptFile:
    version: str
    sections: dict[str, str] = field(hash=False)
    path: str = ""

    def section(self, name: str) -> str:
        return self.sections[name]


def parse_prompt_file(text: str, required: tuple[str, ...], path: str = "") -> PromptFile:
    """Read a prompt file's text; PromptFileError names what is missing."""
    pieces = _SECTION.split(text)
    head, sections = pieces[0], dict(zip(pieces[1::2], pieces[2::2], strict=False))
    where = path or "prompt file"
    version = _VERSION.search(head)
    if not version:
        raise PromptFileError(f"{where}: no `version: NAME` line before the first section")
    missing = [name for name in required if not sections.get(name, "").strip()]
    if missing:
        raise PromptFileError(f"{where}: missing section(s) {', '.join(missing)}")
    return PromptFile(version.group(1), {name: body.strip("\n") for name, body in sections.items()}, path)


@functools.lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int, required: tuple[str, ...]) -> PromptFile:
    return parse_prompt_file(Path(path).read_text(encoding="utf-8"), required, path)


def load_prompt_file(path: str | Path, required: tuple[str, ...]) -> PromptFile:
    """The prompt file at `path`, re-read when it changes on disk."""
    chosen = Path(path)
    try:
        return _load(str(chosen), chosen.stat().st_mtime_ns, required)
    except OSError as exc:
        raise PromptFileError(f"cannot read prompt file {chosen}: {exc.strerror or exc}") from exc


def one_paragraph(text: str) -> str:
    """A section wrapped for reading, as the one paragraph a model gets."""
    return " ".join(text.split())
