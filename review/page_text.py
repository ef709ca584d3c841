"""How much of an episode's untrusted text its page shows: an agent's answer of 10 MB made a 10.5 MB page. Long text
is cut (saying how much was left out) and each long part can be read whole as plain text
(`review:episode_text`)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from taskgen.models import Episode

PAGE_SHOWN = 20_000  # characters of an answer, or of the last screen's text, rendered on the page
CELL_SHOWN = 2_000  # one request's parameters or body, a changed value, an action, a reasoning, a judge's evidence


def text_clip(text: str, limit: int = CELL_SHOWN) -> str:
    """The text, or its first `limit` characters and how many more there are."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


@dataclass(frozen=True)
class PageText:
    """The part of a long text the page shows (`shown`), its whole length and what was left out."""

    shown: str
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.shown)

    @property
    def size(self) -> str:
        return f"{self.total:,}"


def page_text(text: str) -> PageText:
    return PageText(shown=text[:PAGE_SHOWN], total=len(text))


def _as_json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


WHOLE_TEXTS = {  # what `review:episode_text` serves whole, by name
    "answer": lambda episode: episode.answer or "",
    "screen-text": lambda episode: episode.last_screen_text,
    "request-log": lambda episode: _as_json_text(episode.request_log or []),
    "data-changes": lambda episode: _as_json_text(episode.data_changes or []),
}


def episode_whole_text(*, episode: Episode, part: str) -> str | None:
    """One of the episode's long texts whole (None for a part that is not one of WHOLE_TEXTS)."""
    reader = WHOLE_TEXTS.get(part)
    return reader(episode) if reader else None
