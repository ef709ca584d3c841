"""The judge's evidence for an episode, built line for line as the reference judge builds it.

The lines are data, not wording: a judge validated on the reference's evidence stays comparable only if every filter,
cap and line format here matches it (request lines: the last 60, without static/admin paths, empty parameters and
csrf tokens; change lines: the first 30; action lines: the last 40, without done markers; answer 1,500 chars; last
screen text 2,500 chars; up to 10 screenshots, the start then the end, final last). Each line keeps the index of the
log entry, change or action it came from, so the review page can link a line to its source.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from django.db import connection

from taskgen.models import Blob, Episode, Screenshot
from taskgen.request_noise import is_request_noise

REQUEST_CAP, CHANGE_CAP, ACTION_CAP = 60, 30, 40
ANSWER_CAP, SCREEN_TEXT_CAP, SCREENSHOT_CAP = 1500, 2500, 10
DONE_MARKERS = ("done", "macro_done")
NONE_TEXT = "(none)"
# The episode's fields the evidence is built from (with its screenshots): a judge reads only these, not the rows,
# the episode.json or `extra` an episode also carries.
EVIDENCE_FIELDS = ("task_kind", "request_log", "data_changes", "actions", "answer", "screen_text", "task__instruction")


class EvidenceShot(NamedTuple):
    """A screenshot the judge sees, as plain values (a model row and its blob's row per screenshot were a sixth of
    a judgment's CPU): its file name, step (None for the final one), kind and its blob's hash and MIME type."""

    name: str
    step: int | None
    kind: str
    sha256: str
    content_type: str


# An episode's step and final screenshots with their blobs' hash and type, in the rows' own order (Screenshot.Meta):
# one plain statement, as the ORM's values_list over the join took 0.75 ms of CPU a judgment to build and this 0.1.
SHOTS_SQL = """
SELECT s.name, s.step, s.kind, b.sha256, b.content_type FROM {screenshot} s JOIN {blob} b ON b.id = s.blob_id
WHERE s.episode_id = %s AND s.kind IN (%s, %s) ORDER BY s.kind, s.step"""


@dataclass(frozen=True)
class EvidenceLine:
    """One evidence line and the index of the request, change or action it was made from."""

    text: str
    index: int


@dataclass
class Evidence:
    """Everything the judge sees about one episode, in the order and shape the reference sends it."""

    instruction: str
    task_kind: str
    request_lines: list[EvidenceLine] = field(default_factory=list)
    change_lines: list[EvidenceLine] = field(default_factory=list)
    action_lines: list[EvidenceLine] = field(default_factory=list)
    answer: str = NONE_TEXT
    screen_text: str = ""
    screenshots: list[EvidenceShot] = field(default_factory=list)
    step_files: dict[str, int] = field(default_factory=dict)  # every step screenshot's lower-case name -> step

    @property
    def requests_text(self) -> str:
        return "\n".join(line.text for line in self.request_lines) or NONE_TEXT

    @property
    def changes_text(self) -> str:
        return "\n".join(line.text for line in self.change_lines) or NONE_TEXT

    @property
    def actions_text(self) -> str:
        return "\n".join(line.text for line in self.action_lines) or NONE_TEXT


def _dumps(value, cap: int) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:cap]


def _kept_params(params, dropped: tuple[str, ...] = ()):
    """Parameters without empty values (and without csrf tokens for bodies); a non-object body is kept as it is."""
    if not isinstance(params, dict):
        return params
    return {k: v for k, v in params.items() if v not in ("", None) and k not in dropped}


def request_line(entry: dict) -> str | None:
    """`GET /path ?{"q": "x"} body {...} -> 200`, or None for a static, favicon or admin request."""
    path = str(entry.get("path") or "")
    if is_request_noise(path):
        return None
    query = _kept_params(entry.get("query") or {})
    body = _kept_params(entry.get("body"), ("csrf_token",))
    text = f"{entry.get('method')} {path}"
    if query:
        text += f" ?{_dumps(query, 200)}"
    if body:
        text += f" body {_dumps(body, 300)}"
    return text + f" -> {entry.get('status')}"


def evidence_request_lines(log: list | None) -> list[EvidenceLine]:
    """The session's requests as lines, the last REQUEST_CAP of those kept."""
    lines = []
    for index, entry in enumerate(log or []):
        text = request_line(entry) if isinstance(entry, dict) else None
        if text is not None:
            lines.append(EvidenceLine(text, index))
    return lines[-REQUEST_CAP:]


def change_line(change: dict) -> str:
    """`update orders (name): {"status": ...}`: op, collection, the item's name, then what changed."""
    what = change.get("collection") or change.get("table") or change.get("kind") or "?"
    before, after = change.get("before"), change.get("after")
    op = change.get("op") or ("create" if not before else "delete" if not after else "update")
    item = after or before or {}
    item = item if isinstance(item, dict) else {}
    name = item.get("title") or item.get("name") or item.get("subject") or item.get("id")
    return f"{op} {what} ({name}): " + _dumps(change.get("changed") or {}, 400)


def evidence_change_lines(changes: list | None) -> list[EvidenceLine]:
    """The session's data changes as lines, the first CHANGE_CAP."""
    lines = [EvidenceLine(change_line(c), i) for i, c in enumerate(changes or []) if isinstance(c, dict)]
    return lines[:CHANGE_CAP]


def action_line(action) -> str | None:
    """`click {"index": 3}`: the action's name and its non-empty parameters; None for done markers and junk."""
    if not isinstance(action, dict) or not action:
        return None
    name = next(iter(action))
    if name in DONE_MARKERS:
        return None
    params = action[name] or {}
    params = {k: v for k, v in params.items() if v not in (None, "", False)} if isinstance(params, dict) else {}
    return f"{name} {_dumps(params, 160)}"


def evidence_action_lines(actions: list | None) -> list[EvidenceLine]:
    """The agent's actions as lines, the last ACTION_CAP of those kept."""
    lines = []
    for index, action in enumerate(actions or []):
        text = action_line(action)
        if text is not None:
            lines.append(EvidenceLine(text, index))
    return lines[-ACTION_CAP:]


def last_screen_text(seen) -> str:
    """The text of the last page the agent saw; a JSON page (an API response) is kept as JSON text."""
    if not isinstance(seen, list):
        seen = [seen] if seen else []
    last = (seen or [""])[-1] or ""
    return last if isinstance(last, str) else json.dumps(last, ensure_ascii=False, default=str)


def pick_screenshots(shots: list, cap: int = SCREENSHOT_CAP) -> list:
    """Up to `cap` screenshots: the first quarter from the start, the rest from the end (final last)."""
    if len(shots) <= cap:
        return list(shots)
    head = max(1, cap // 4)
    return list(shots[:head]) + list(shots[-(cap - head):])


def episode_screenshots(episode: Episode) -> list[EvidenceShot]:
    """The episode's step screenshots in step order, then its final screenshot (row images are not evidence)."""
    quote = connection.ops.quote_name
    sql = SHOTS_SQL.format(screenshot=quote(Screenshot._meta.db_table), blob=quote(Blob._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [episode.pk, Screenshot.Kind.STEP, Screenshot.Kind.FINAL])
        rows = [EvidenceShot(*row) for row in cursor.fetchall()]
    steps = [s for s in rows if s.kind == Screenshot.Kind.STEP]  # in step order: the statement sorts them
    return steps + [s for s in rows if s.kind == Screenshot.Kind.FINAL]


def evidence_for_episode(*, episode: Episode) -> Evidence:
    """The evidence the judge sees for one episode (one query for screenshots, none for the rest)."""
    shots = episode_screenshots(episode)
    return Evidence(
        instruction=episode.task.instruction,
        task_kind=episode.task_kind,
        request_lines=evidence_request_lines(episode.request_log),
        change_lines=evidence_change_lines(episode.data_changes),
        action_lines=evidence_action_lines(episode.actions),
        answer=(episode.answer or NONE_TEXT)[:ANSWER_CAP],
        screen_text=last_screen_text(episode.screen_text)[:SCREEN_TEXT_CAP],
        screenshots=pick_screenshots(shots),
        step_files={s.name.lower(): s.step for s in shots if s.kind == Screenshot.Kind.STEP},
    )
