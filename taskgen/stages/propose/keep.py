"""What of a proposer's answer is kept: the rules for reading an answer, normalised text, task ids, the reference's
task record, and the grounding check. Pure functions; the database writes are in service.py."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from taskgen.providers.answer_json import AnswerUnreadable, answer_json
from taskgen.quoted import quoted_in

MIN_INSTRUCTION = 15  # shorter "instructions" are fragments, not goals
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# Two or more capitalised words in a row read as a name ("Kenyan AA Whole Beans", "Amélie Dubois").
_CAPITALISED = re.compile(r"\b[A-ZÀ-ÖØ-Þ][\w'’.&-]*(?:\s+(?:de|du|la|le|of|the|&|à)?\s*[A-ZÀ-ÖØ-Þ0-9][\w'’.&-]*)+")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+)$")


@dataclass
class Sorted:
    """A batch's items sorted into kept ones and the counts of the rest."""

    kept: list[dict] = field(default_factory=list)
    duplicates: int = 0
    invalid: int = 0
    over: int = 0  # good tasks beyond what the site still needed


def normalised(text: str) -> str:
    """Text compared for duplicates: lower case, every run of other characters one space."""
    return _NOT_ALNUM.sub(" ", text.lower()).strip()


def task_id_for(site: str, instruction: str) -> str:
    """`tg-<site>-<first 8 hex of md5(instruction)>`, the reference's id rule."""
    return f"tg-{site}-{hashlib.md5(instruction.encode()).hexdigest()[:8]}"  # noqa: S324 (an id, not security)


def proposed_record(*, site: str, instruction: str, start_path: str, task_kind: str) -> dict:
    """The reference's record of a proposed task, keys in its order."""
    return {"kind": "proposed", "task_id": task_id_for(site, instruction), "site": site, "sites": [site],
            "macro": "proposed", "macros": [], "instruction": instruction, "start_path": start_path,
            "task_kind": task_kind, "verifier": None}


def tasks_jsonl_line(record: dict) -> str:
    """One line of tasks.jsonl as the reference writes it (non-ASCII kept)."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def answer_items(text: str) -> list:
    """The items of a proposer's answer: {"tasks": [...]} or a bare list; AnswerUnreadable otherwise."""
    try:  # the one rule for reading a model's JSON (a fence, prose or a <think> block before it)
        got = answer_json(text, wanted=lambda value: isinstance(value, list) or "tasks" in value, lists=True)
    except AnswerUnreadable as exc:
        raise AnswerUnreadable(f"the answer is not JSON ({exc})") from exc
    items = got.get("tasks") if isinstance(got, dict) else got
    if items is None and isinstance(got, dict):
        items = []
    if not isinstance(items, list):
        raise AnswerUnreadable(f"the answer's tasks are a {type(items).__name__}, not a list")
    return items


def item_instruction(item: object) -> str:
    """The instruction of one answer item ('' when it has none)."""
    return str(item.get("instruction") or "").strip() if isinstance(item, dict) else ""


def item_kind(item: dict) -> str:
    return item.get("kind") if item.get("kind") in ("info", "action") else "action"


def sort_items(items: list, *, seen: set[str], room: int) -> Sorted:
    """Keep items with an instruction of at least 15 characters whose normalised text is not in `seen` (updated),
    at most `room` of them."""
    out = Sorted()
    for item in items:
        instruction = item_instruction(item)
        if len(instruction) < MIN_INSTRUCTION:
            out.invalid += 1
        elif normalised(instruction) in seen:
            out.duplicates += 1
        elif len(out.kept) >= room:
            out.over += 1
        else:
            seen.add(normalised(instruction))
            out.kept.append({"instruction": instruction, "kind": item_kind(item)})
    return out


def named_items(instruction: str) -> list[str]:
    """What a task names: its quoted names and its runs of capitalised words (a first word that only starts the
    sentence is not part of a name)."""
    names = [quote.text for quote in quoted_in(instruction)]  # what a task quotes is a name it expects to find
    for match in _CAPITALISED.finditer(instruction):
        words = match.group(0).split()
        if _SENTENCE_START.search(instruction[:match.start()]):
            words = words[1:]
        if len(words) >= 2:
            names.append(" ".join(words))
    return list({normalised(name): name for name in reversed(names)}.values())[::-1]  # once each, quoted first


def grounding_note(instruction: str, known: str) -> str:
    """'' when everything the task names appears in the site's context; else the note. `known` is the context's
    text normalised (see `known_text`)."""
    missing = [name for name in named_items(instruction)
               if normalised(name) and f" {normalised(name)} " not in known]
    if not missing:
        return ""
    return "names something not on the site: " + ", ".join(f"“{name}”" for name in missing[:3])


def known_text(pieces: list[str]) -> str:
    """The site's words as grounding compares them: normalised, with a space at each end (whole words match)."""
    return f" {normalised(' '.join(pieces))} "
