"""What a judge's evidence text cites, and whether the episode holds it: one reader for every form a judge writes.

Forms: `request #N` (the request log's index, counted from 0, as the page numbers it and the rules baseline cites
it), `change #N` (the data changes, from 0), `step N` / `screenshot N` / `step_N.png` (steps count from 1, as in
taskgen/steps.py), `action N` (from 1), a path (`/sites/shop/cart`), a collection named by a data change, a quoted
value ("Brazil Santos Bourbon"), and the agent's answer. A collection is cited by the name a data change gives it
(`cart_items`) or as a collection or table by name ("the orders collection", `table "bookings"`).

A citation that points at nothing is **unsupported**: a number past the end of what was recorded, always; a path,
quoted value or answer found nowhere in the episode's evidence, when the part citing it is marked done (a part not
done may well say "no request to /checkout was made"); a collection named as one that no data change touched
(the episode may have none), when the part is done and the text does not say it was left alone. Each place is cited
once: "request #4 (GET /cart)" lists request #4, not the request and then its path. A judge citing evidence that
does not exist is a likely false positive, so the count is stored on each judgment (`Judgment.unsupported_citations`)
for filters and queues.

Plain data in, plain data out: the data migration that counts stored judgments calls it too.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from taskgen.quoted import quoted_in
from taskgen.request_noise import is_request_noise

_NUMBERED = re.compile(
    r"\b(?P<kind>requests?|changes?|data changes?|steps?|screenshots?|actions?)\s*(?P<nums>#?\d+(?:\s*(?:,|and|&|or)"
    r"\s*#?\d+)*)", re.I)
_STEP_FILE = re.compile(r"\bstep_(\d{1,6})\.png\b", re.I)
_PATH = re.compile(r"(?<![\w/:.<])/(?:[\w\-.%~]+/?)+")
_ANSWER = re.compile(r"\b(?:final answer|the answer|its answer|agent's answer|answer says)\b"
                     r"|(?:\bin|,)\s*answer\b", re.I)
_COLLECTION_NAMED = re.compile(
    r"[`\"'“‘]?(?P<before>[A-Za-z_][\w.-]{1,60})[`\"'”’]?\s+(?:collection|table)s?\b"
    r"|\b(?:collection|table)[\"']?\s*[:=]?\s*[`\"'“‘](?P<after>[A-Za-z_][\w.-]{1,60})[`\"'”’]", re.I)
_NOT_A_NAME = {"the", "a", "an", "this", "that", "these", "those", "any", "no", "same", "data", "each", "every",
               "which", "its", "their", "one", "other", "another", "some", "database", "whole", "right", "wrong",
               "relevant", "new", "empty", "said", "given", "expected", "correct", "of", "in", "to", "from", "and",
               "or", "is"}
_NEGATION = re.compile(r"\b(?:no|not|none|nothing|without|never|neither|nor)\b|n't\b", re.I)
_KINDS = {"request": "request", "change": "change", "data change": "change", "step": "step", "screenshot": "step",
          "action": "action"}


@dataclass(frozen=True)
class Citation:
    """One thing an evidence text cites: how it was written, the page anchor it points at (None: nothing there),
    a short description of what it points at, and whether it counts as unsupported."""

    kind: str
    written: str
    anchor: str | None
    label: str
    unsupported: bool = False
    at: int = field(default=0, compare=False)  # where the evidence text writes it: citations are listed in that order


def evidence_text(value) -> str:
    """An evidence value as text: strings as they are, anything else as compact JSON, empty values as ""."""
    if value in (None, "", {}, []):
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class EvidenceIndex:
    """An episode's evidence as citations look things up in it."""

    request_paths: list[tuple[int, str, str]] = field(default_factory=list)  # index, method, path
    change_collections: list[tuple[int, str, str]] = field(default_factory=list)  # index, op, collection
    steps: int = 0
    step_files: dict[str, int] | None = None  # step_N.png -> step number
    places: list[tuple[str, str, str]] = field(default_factory=list)  # anchor, description, lower-cased text
    has_answer: bool = False
    instruction: str = ""  # lower-cased: a value quoted from the task itself is not a citation of evidence

    @classmethod
    def from_fields(cls, *, request_log, data_changes, actions, answer, screen_text, instruction: str = "",
                    step_files: dict[str, int] | None = None) -> EvidenceIndex:
        """`step_files` maps each step screenshot's file name to its step; None when not known (then `step_N.png`
        counts as there when N is within the steps)."""
        index = cls(steps=len(actions) if isinstance(actions, list) else 0, step_files=step_files,
                    has_answer=bool((answer or "").strip()), instruction=(instruction or "").lower())
        for n, entry in enumerate(request_log if isinstance(request_log, list) else []):
            entry = entry if isinstance(entry, dict) else {"path": evidence_text(entry)}
            method, path = str(entry.get("method") or "").upper(), str(entry.get("path") or "")
            index.request_paths.append((n, method, path))
            text = " ".join([method, path, evidence_text(entry.get("query")), evidence_text(entry.get("body"))])
            index.places.append((f"req-{n}", f"request #{n}", text.lower()))
        for n, change in enumerate(data_changes if isinstance(data_changes, list) else []):
            change = change if isinstance(change, dict) else {}
            what = str(change.get("collection") or change.get("table") or change.get("kind") or "?")
            index.change_collections.append((n, str(change.get("op") or "change"), what))
            index.places.append((f"chg-{n}", f"change #{n}", evidence_text(change).lower()))
        for n, action in enumerate(actions if isinstance(actions, list) else []):
            index.places.append((f"act-{n + 1}", f"action {n + 1}", evidence_text(action).lower()))
        index.places.append(("answer", "the answer", (answer or "").lower()))
        seen = screen_text if isinstance(screen_text, list) else [screen_text]
        index.places.append(("screen-text", "the screen text", " ".join(evidence_text(s) for s in seen).lower()))
        return index

    @classmethod
    def for_episode(cls, episode, step_files: dict[str, int] | None = None) -> EvidenceIndex:
        return cls.from_fields(request_log=episode.request_log, data_changes=episode.data_changes,
                               actions=episode.actions, answer=episode.answer, screen_text=episode.screen_text,
                               instruction=episode.task.instruction, step_files=step_files)

    def step_of_file(self, name: str) -> int | None:
        if self.step_files is not None:
            return self.step_files.get(name.lower())
        number = int(re.sub(r"\D", "", name) or -1)
        return number if 0 <= number <= self.steps else None

    def find(self, value: str) -> tuple[str, str] | None:
        """The first place (anchor, description) whose text holds the value, case ignored."""
        needle = value.lower()
        return next(((anchor, what) for anchor, what, text in self.places if needle in text), None)


def _numbers(raw: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", raw)]


def _numbered(kind: str, n: int, ev: EvidenceIndex) -> Citation:
    if kind == "request":
        hit = next((r for r in ev.request_paths if r[0] == n), None)
        return (Citation("request", f"request #{n}", f"req-{n}", f"request #{n} · {hit[1]} {hit[2]}") if hit else
                Citation("request", f"request #{n}", None, f"request #{n}: the log has {len(ev.request_paths)}",
                         unsupported=True))
    if kind == "change":
        hit = next((c for c in ev.change_collections if c[0] == n), None)
        return (Citation("change", f"change #{n}", f"chg-{n}", f"change #{n} · {hit[1]} {hit[2]}") if hit else
                Citation("change", f"change #{n}", None,
                         f"change #{n}: {len(ev.change_collections)} data changes recorded", unsupported=True))
    name = "step" if kind == "step" else "action"
    if 1 <= n <= ev.steps:
        anchor = f"step-{n}" if kind == "step" and n in (ev.step_files or {}).values() else f"act-{n}"
        return Citation(name, f"{name} {n}", anchor, f"{name} {n}")
    return Citation(name, f"{name} {n}", None, f"{name} {n}: the episode has {ev.steps} steps", unsupported=True)


def _numbered_citations(text: str, ev: EvidenceIndex) -> list[Citation]:
    found = []
    for match in _NUMBERED.finditer(text):
        kind = _KINDS[re.sub(r"s$", "", match.group("kind").lower())]
        found += [replace(_numbered(kind, n, ev), at=match.start()) for n in _numbers(match.group("nums"))]
    for match in _STEP_FILE.finditer(text):
        name, number = match.group(0), ev.step_of_file(match.group(0))
        found.append(Citation("step", name, f"step-{number}", name, at=match.start()) if number is not None else
                     Citation("step", name, None, f"{name}: no such screenshot", unsupported=True, at=match.start()))
    return found


def _path_citations(text: str, ev: EvidenceIndex, done: bool) -> list[Citation]:
    found = []
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip(".,;:")
        if len(path) < 2 or _STEP_FILE.search(path):
            continue
        key = path.rstrip("/").lower()
        requests = sorted(ev.request_paths, key=lambda r: is_request_noise(r[2]))  # pages before assets
        hit = next((r for r in requests if r[2].rstrip("/").lower() == key), None) or next(
            (r for r in requests if r[2].rstrip("/").lower().endswith(key) and key.count("/") > 1), None)
        if hit:
            found.append(Citation("path", path, f"req-{hit[0]}", f"{hit[1]} {hit[2]}", at=match.start()))
            continue
        place = ev.find(path)
        found.append(Citation("path", path, place[0], f"{path} in {place[1]}", at=match.start()) if place else
                     Citation("path", path, None, f"{path}: requested by no request", unsupported=done,
                              at=match.start()))
    return found


def _value_citations(text: str, ev: EvidenceIndex, done: bool) -> list[Citation]:
    found = []
    for quote in quoted_in(text):
        value = quote.text.strip()
        if len(value) < 2 or value.startswith("/"):
            continue  # paths are read as paths
        place = ev.find(value)
        if place is None and value.lower() in ev.instruction:
            continue  # the judge quoting the task, not the evidence
        shown = f'"{value[:60]}"'
        found.append(Citation("value", shown, place[0], f"{shown} in {place[1]}", at=quote.start) if place else
                     Citation("value", shown, None, f"{shown}: found nowhere in the evidence", unsupported=done,
                              at=quote.start))
    return found


def _collection_citations(text: str, ev: EvidenceIndex, done: bool) -> list[Citation]:
    low, found, named = text.lower(), [], set()
    for n, op, what in ev.change_collections:
        named_at = re.search(rf"\b{re.escape(what.lower())}\b", low) if what != "?" else None
        if named_at and what.lower() not in named:
            named.add(what.lower())
            found.append(Citation("collection", what, f"chg-{n}", f"change #{n} · {op} {what}", at=named_at.start()))
    for match in _COLLECTION_NAMED.finditer(text):
        name = match.group("before") or match.group("after")
        if name.lower() in _NOT_A_NAME or name.lower() in named or _says_untouched(text, match.start()):
            continue
        named.add(name.lower())
        hit = _change_of_collection(name, ev)
        recorded = sorted({c[2] for c in ev.change_collections})
        found.append(Citation("collection", hit[2], f"chg-{hit[0]}", f"change #{hit[0]} · {hit[1]} {hit[2]}",
                              at=match.start()) if hit else
                     Citation("collection", name, None, f"{name}: " + (
                         f"no data change in it (changed: {', '.join(recorded)})" if recorded
                         else "the episode recorded no data changes"), unsupported=done, at=match.start()))
    return found


def _change_of_collection(name: str, ev: EvidenceIndex) -> tuple[int, str, str] | None:
    """The first data change of the collection a judge names (orders, order: a plural or singular is the same)."""
    forms = {name.lower(), name.lower().rstrip("s"), name.lower() + "s"}
    return next((c for c in ev.change_collections if c[2].lower() in forms or c[2].lower().rstrip("s") in forms),
                None)


def _says_untouched(text: str, at: int) -> bool:
    """Whether the sentence before a named collection says it was left alone ("no row was added to orders")."""
    sentence = re.split(r"[.;!?\n]", text[max(0, at - 80):at])[-1]
    return _NEGATION.search(sentence) is not None


def _answer_citation(text: str, ev: EvidenceIndex, done: bool) -> list[Citation]:
    match = _ANSWER.search(text)
    if not match:
        return []
    if ev.has_answer:
        return [Citation("answer", "answer", "answer", "the answer", at=match.start())]
    return [Citation("answer", "answer", None, "the answer: the agent gave none", unsupported=done, at=match.start())]


def citations_in(evidence: str, ev: EvidenceIndex, *, done: bool = True) -> list[Citation]:
    """Every citation in one part's evidence text, each place once, in the order the text writes them."""
    text = evidence or ""
    found = (_numbered_citations(text, ev) + _path_citations(text, ev, done) + _value_citations(text, ev, done)
             + _collection_citations(text, ev, done) + _answer_citation(text, ev, done))
    seen, out = set(), []
    # one citation per place: "request #4 (GET /cart)", "step 2 (step_2.png)" or 'the "orders" table' name one thing
    # twice (a quoted name is read as what it names before it is read as a value)
    for citation in sorted(found, key=lambda c: (c.at, c.kind == "value")):
        key = citation.anchor or citation.written.strip('"').lower()
        if key not in seen:
            seen.add(key)
            out.append(citation)
    return out


def unsupported_count(parts, ev: EvidenceIndex) -> int:
    """How many citations of a judgment's parts point at nothing (what Judgment.unsupported_citations stores)."""
    return sum(c.unsupported for p in (parts if isinstance(parts, list) else []) if isinstance(p, dict)
               for c in citations_in(str(p.get("evidence") or ""), ev, done=p.get("done") is True))
