"""Judge prompt templates: versioned text files (taskgen/prompts/judge_v1.txt is the default; a user points
settings.JUDGE_PROMPT_FILE at their own). Format: comment lines, `version: NAME`, then `=== system ===` and
`=== prompt ===` sections; the prompt's $placeholders are filled from the evidence."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from django.conf import settings

from taskgen.stages.evidence import Evidence

DEFAULT_PROMPT_FILE = Path(__file__).resolve().parent.parent / "prompts" / "judge_v1.txt"
PLACEHOLDERS = ("task", "n_actions", "actions", "answer", "requests", "changes", "screen_text")
_SECTION = re.compile(r"^=== (system|prompt) ===[ \t]*$", re.MULTILINE)
_VERSION = re.compile(r"^version:\s*(\S+)\s*$", re.MULTILINE)


class PromptFileError(ValueError):
    """The prompt file is missing, or lacks its version or a section."""


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    template: str
    path: str

    def render(self, evidence: Evidence) -> str:
        """The prompt for one episode; $ signs inside the evidence are left as they are."""
        return Template(self.template).safe_substitute(
            task=evidence.instruction, n_actions=len(evidence.action_lines), actions=evidence.actions_text,
            answer=evidence.answer, requests=evidence.requests_text, changes=evidence.changes_text,
            screen_text=evidence.screen_text,
        )


def parse_prompt_file(text: str, path: str = "") -> JudgePrompt:
    """Read a prompt file's text; PromptFileError says what is missing."""
    pieces = _SECTION.split(text)
    head, sections = pieces[0], dict(zip(pieces[1::2], pieces[2::2], strict=False))
    version = _VERSION.search(head)
    if not version:
        raise PromptFileError(f"{path or 'prompt file'}: no `version: NAME` line before the first section")
    missing = [name for name in ("system", "prompt") if not sections.get(name, "").strip()]
    if missing:
        raise PromptFileError(f"{path or 'prompt file'}: missing section(s) {', '.join(missing)}")
    system = " ".join(sections["system"].split())  # the file wraps lines for reading; the model gets one paragraph
    return JudgePrompt(version.group(1), system, sections["prompt"].strip("\n"), path)


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> JudgePrompt:
    return parse_prompt_file(Path(path).read_text(encoding="utf-8"), path)


def judge_prompt(path: str | None = None) -> JudgePrompt:
    """The judge prompt in use: `path`, else settings.JUDGE_PROMPT_FILE, else the packaged default."""
    chosen = Path(path or settings.JUDGE_PROMPT_FILE or DEFAULT_PROMPT_FILE)
    try:
        return _load(str(chosen), chosen.stat().st_mtime_ns)
    except OSError as exc:
        raise PromptFileError(f"cannot read judge prompt file {chosen}: {exc.strerror or exc}") from exc
