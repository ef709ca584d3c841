"""Judge prompt templates: versioned text files (taskgen/prompts/judge_v1.txt is the default; a user points
settings.JUDGE_PROMPT_FILE at their own). Format: comment lines, `version: NAME`, then `=== system ===` and
`=== prompt ===` sections; the prompt's $placeholders are filled from the evidence."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

from django.conf import settings

from taskgen.prompt_files import PromptFile, PromptFileError, load_prompt_file, one_paragraph
from taskgen.prompt_files import parse_prompt_file as parse_prompt_file_text
from taskgen.stages.judge.evidence import Evidence

__all__ = ["DEFAULT_PROMPT_FILE", "JudgePrompt", "PromptFileError", "judge_prompt", "parse_prompt_file"]

DEFAULT_PROMPT_FILE = Path(__file__).resolve().parents[2] / "prompts" / "judge_v1.txt"
PLACEHOLDERS = ("task", "n_actions", "actions", "answer", "requests", "changes", "screen_text")
_REQUIRED = ("system", "prompt")


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
    """Read a judge prompt file's text; PromptFileError says what is missing."""
    return _judge_prompt(parse_prompt_file_text(text, _REQUIRED, path))


def _judge_prompt(file: PromptFile) -> JudgePrompt:
    return JudgePrompt(file.version, one_paragraph(file.section("system")), file.section("prompt"), file.path)


def judge_prompt(path: str | None = None) -> JudgePrompt:
    """The judge prompt in use: `path`, else settings.JUDGE_PROMPT_FILE, else the packaged default."""
    chosen = Path(path or settings.JUDGE_PROMPT_FILE or DEFAULT_PROMPT_FILE)
    return _judge_prompt(load_prompt_file(chosen, _REQUIRED))
