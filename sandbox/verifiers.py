"""Programmatic task verifiers, evaluated against a sandbox session's final state, request log and the answer.

A verifier is JSON: {"checks": [check, ...], "solution": [action, ...]}. Each check is one part of the task:
  {"part": "...", "type": "answer_contains", "values": ["87.00", ...]}      every value appears in the answer
  {"part": "...", "type": "row_exists", "site": "shop", "collection": "orders", "where": {...}}
  {"part": "...", "type": "row_absent", ... same as row_exists ...}
  {"part": "...", "type": "request_made", "method": "GET", "path": "/sites/shop/search/", "query": {...}}
`where` values match exactly (numbers and their text are the same), or by operator: {"contains": "text"}
(case-insensitive), {"has": {where}} (a list holding a matching item). `solution` is the known way to do it.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any


class VerifierError(ValueError):
    """The verifier JSON is malformed (an unknown check type, a missing field)."""


@dataclass
class VerifierOutcome:
    ok: bool
    parts: list[dict] = field(default_factory=list)  # [{part, ok}]

    def as_dict(self) -> dict:
        return {"ok": self.ok, "parts": self.parts}


def normalize_text(value: Any) -> str:
    """Casefolded NFC text with whitespace collapsed and typographic quotes made plain, for lenient comparison."""
    text = unicodedata.normalize("NFC", str(value)).casefold()
    text = text.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "\u00a0": " "}))
    return re.sub(r"\s+", " ", text).strip()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or str(a).lower() == str(b).lower()
    return a == b or normalize_text(a) == normalize_text(b)


def value_matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict) and "contains" in expected:
        return normalize_text(expected["contains"]) in normalize_text(actual or "")
    if isinstance(expected, dict) and "has" in expected:
        return isinstance(actual, list) and any(row_matches(x, expected["has"]) for x in actual if isinstance(x, dict))
    return _same(actual, expected)


def row_matches(row: dict, where: dict) -> bool:
    return all(value_matches(row.get(k), v) for k, v in where.items())


def _check_rows(check: dict, state: dict) -> bool:
    try:
        rows = state.get(check["site"], {}).get(check["collection"], [])
        where = check["where"]
    except (KeyError, AttributeError) as exc:
        raise VerifierError(f"{check.get('type')} needs site, collection and where") from exc
    return any(row_matches(r, where) for r in rows)


def _check_request(check: dict, log: list[dict]) -> bool:
    method = str(check.get("method", "GET")).upper()
    wanted = check.get("query") or {}
    return any(e.get("method") == method and e.get("path") == check.get("path")
               and all(value_matches((e.get("query") or {}).get(k), v) for k, v in wanted.items())
               and (e.get("status") or 0) < 400 for e in log)


def check_passes(check: dict, *, state: dict, answer: str, log: list[dict]) -> bool:
    kind = check.get("type")
    if kind == "answer_contains":
        return all(normalize_text(v) in normalize_text(answer or "") for v in check.get("values") or [])
    if kind == "row_exists":
        return _check_rows(check, state)
    if kind == "row_absent":
        return not _check_rows(check, state)
    if kind == "request_made":
        return _check_request(check, log)
    raise VerifierError(f"unknown verifier check type {kind!r}")


def verifier_evaluate(*, verifier: dict, state: dict, answer: str, log: list[dict]) -> VerifierOutcome:
    """Every check of the verifier against one episode's final state, log and answer; ok only if all pass."""
    checks = (verifier or {}).get("checks")
    if not checks:
        raise VerifierError("the verifier has no checks")
    parts = [{"part": c.get("part") or c.get("type"), "ok": check_passes(c, state=state, answer=answer, log=log)}
             for c in checks]
    return VerifierOutcome(ok=all(p["ok"] for p in parts), parts=parts)
