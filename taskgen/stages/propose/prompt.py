"""The proposer's prompt: a versioned template file (taskgen/prompts/propose_v1.txt unless
settings.PROPOSE_PROMPT_FILE names another), read through taskgen/prompt_files.py like the judge's."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

from django.conf import settings

from taskgen.prompt_files import PromptFile, load_prompt_file, one_paragraph

DEFAULT_PROMPT_FILE = Path(__file__).resolve().parents[2] / "prompts" / "propose_v1.txt"
_REQUIRED = ("system", "prompt")
INFO_SHARE = 0.4  # about 40% information tasks, 60% tasks that do something


@dataclass(frozen=True)
class ProposePrompt:
    version: str
    system: str
    template: str

    def render(self, *, name: str, home: str, context: str, n: int, focus: str, avoid: list[str]) -> str:
        """The prompt of one batch; $ signs inside the site's text are left as they are."""
        n_info = round(n * INFO_SHARE)
        return Template(self.template).safe_substitute(
            name=name, home=home, context=context, n=n, n_info=n_info, n_action=n - n_info, focus=focus,
            avoid="; ".join(avoid) or "(none yet)")


def _propose_prompt(file: PromptFile) -> ProposePrompt:
    return ProposePrompt(file.version, one_paragraph(file.section("system")), file.section("prompt"))


def propose_prompt(path: str | None = None) -> ProposePrompt:
    """The proposer prompt in use: `path`, else settings.PROPOSE_PROMPT_FILE, else the packaged default."""
    return _propose_prompt(load_prompt_file(Path(path or settings.PROPOSE_PROMPT_FILE or DEFAULT_PROMPT_FILE),
                                            _REQUIRED))
