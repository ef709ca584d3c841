"""The offline baseline judge: deterministic rules over the backend evidence, not a model.

It splits the goal into parts (at "and", "then", commas and semicolons, but never inside quotes or a name: "Chambre
Bleue, Reykjavík", "College of Medicine and Science") and counts a part as done when most of its key words appear
in the session's requests, data changes or final answer; an action goal that changes something
(add, book, send, delete, ...) also needs a data change or a write request. Crude on purpose: it is what the app
uses without an API key, and every verdict says so.
"""
from __future__ import annotations

import json
import re
import time

from taskgen.providers.base import ProviderError, ProviderRequest, ProviderResult
from taskgen.quoted import quoted_in

LABEL = "heuristic baseline (rules, not a model)"
# The judge config's model: v2 split goals outside quotes and names; v3 reads quotes by the app's one quoted-name
# rule (taskgen/quoted.py: `…` is a quote too, a quote is one line of 2 to 200 characters).
VERSION = "rules-v3"
_SPLIT = re.compile(r"\s*(?:[;,]|\band then\b|\bthen\b|\band\b)\s*", re.IGNORECASE)
# Capitalised words joined by "and" or "&" read as one name: "Medicine and Science", "Bed & Breakfast".
_TITLED = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:and|&)\s+[A-Z][\w'’.-]*)+")
_WORD_BEFORE, _WORD_AFTER = re.compile(r"([\w'’.-]+)\W*$"), re.compile(r"^\W*([\w'’.-]+)")
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
STOPWORDS = frozenset(
    "the and for with that this from into onto your you any all are was were has have had its their them then than "
    "what which who whom whose when where how why out off per via about find show tell give list get set make use "
    "page site website web search look open go click report state name there here more most less least each every "
    "only also some one two can could would should will may might must please".split()
)
WRITE_METHODS = ("POST ", "PUT ", "PATCH ", "DELETE ")
# Goals that change something on the site; an "action" task that only searches or browses needs no write.
WRITE_VERB = re.compile(
    r"\b(add|adds|added|book|buy|purchase|order|create|delete|remove|cancel|send|reply|forward|save|update|edit|"
    r"change|set|rename|post|publish|submit|subscribe|unsubscribe|register|sign up|apply|rate|review|follow|"
    r"archive|move|mark|schedule|reserve|pay|transfer|upload|write|compose|invite|assign|enable|disable)\b",
    re.IGNORECASE)


def _protected(text: str) -> list[tuple[int, int]]:
    return [(q.start, q.end) for q in quoted_in(text)] + [m.span() for m in _TITLED.finditer(text)]


def _names_a_known_item(text: str, start: int, end: int, known: str) -> bool:
    """The separator joins two words that the site's own data shows together ("Bleue, Reykjavík" in a room
    name): it is part of an item's name, not a break between parts of the goal."""
    before, after = _WORD_BEFORE.search(text[:start]), _WORD_AFTER.search(text[end:])
    if not (known and before and after):
        return False
    return text[before.start(1):end + after.end(1)].lower() in known


def goal_parts(instruction: str, known: str = "") -> list[str]:
    """The goal cut into its parts at "and", "then", commas and semicolons - but not inside quotes, capitalised
    names ("Medicine and Science"), or names the evidence (`known`, the text of the site's data) shows whole."""
    text, known = instruction or "", (known or "").lower()
    protected = _protected(text)
    parts, start = [], 0
    for match in _SPLIT.finditer(text):
        inside = any(a <= match.start() < b for a, b in protected)
        if not inside and not _names_a_known_item(text, match.start(), match.end(), known):
            parts.append(text[start:match.start()])
            start = match.end()
    parts = [p.strip(" .") for p in [*parts, text[start:]] if p.strip(" .")]
    return [p for p in parts if key_words(p)] or [text.strip() or "(empty goal)"]


def key_words(text: str) -> list[str]:
    return [w for w in dict.fromkeys(m.lower() for m in _WORD.findall(text or "")) if w not in STOPWORDS]


def _sources(evidence) -> list[tuple[str, str]]:
    """(where, text) pairs to search, in a fixed order so the first match reported is always the same."""
    found = [(f"request #{line.index}", line.text) for line in evidence.request_lines]
    found += [(f"change #{line.index}", line.text) for line in evidence.change_lines]
    if evidence.answer and evidence.answer != "(none)":
        found.append(("answer", evidence.answer))
    return found


def judge_part(part: str, sources: list[tuple[str, str]]) -> dict:
    """A part is done when at least half its key words (and at least one) are in the evidence."""
    words = key_words(part)
    haystack = [(where, text.lower()) for where, text in sources]
    hits = {w: next((where for where, text in haystack if w in text), None) for w in words}
    matched = {w: where for w, where in hits.items() if where}
    done = bool(words) and len(matched) * 2 >= len(words)
    if matched:
        where = ", ".join(sorted(set(matched.values())))
        found = f"{len(matched)} of {len(words)} key words found ({', '.join(matched)}) in {where}"
    else:
        found = f"none of its {len(words)} key words ({', '.join(words)}) is in the requests, data changes or answer"
    return {"part": part, "done": done, "evidence": f"{LABEL}: {found}"}


def _write_part(evidence) -> dict:
    writes = [line for line in evidence.request_lines if line.text.startswith(WRITE_METHODS)]
    done = bool(evidence.change_lines or writes)
    changes, n_writes = len(evidence.change_lines), len(writes)
    seen = f"{changes} data change{'s' if changes != 1 else ''}, {n_writes} write request{'s' if n_writes != 1 else ''}"
    return {"part": "the site records the action", "done": done, "evidence": f"{LABEL}: {seen}"}


def rules_verdict(evidence) -> dict:
    """The baseline's answer, in the judge's JSON shape."""
    sources = _sources(evidence)
    known = " ".join([text for _, text in sources] + [evidence.screen_text or ""])
    parts = [judge_part(p, sources) for p in goal_parts(evidence.instruction, known)]
    if evidence.task_kind == "action" and WRITE_VERB.search(evidence.instruction or ""):
        parts.append(_write_part(evidence))
    verdict = "SUCCESS" if all(p["done"] for p in parts) else "NOT SUCCESS"
    return {"parts": parts, "verdict": verdict, "judge": LABEL}


class RulesProvider:
    name = "rules"

    def complete(self, request: ProviderRequest) -> ProviderResult:
        """Judge from `request.evidence`; no tokens, no network."""
        if request.evidence is None:
            raise ProviderError("the rules baseline judges evidence, and this request carries none", transient=False)
        started = time.monotonic()
        text = json.dumps(rules_verdict(request.evidence), ensure_ascii=False)
        return ProviderResult(text=text, latency_ms=int((time.monotonic() - started) * 1000))
