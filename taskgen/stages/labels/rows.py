"""One line of a labels backup, checked before anything is written: its kind, names and times, and every field a
label or final label holds through the same check as a reviewer's label (taskgen/labels/fields.py). A line that fails
is refused with why; a line that passes comes back as the values the restore writes.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime

from taskgen.labels.backup import KINDS
from taskgen.labels.fields import ReviewError, final_label_record_clean, label_record_clean
from taskgen.text_input import TextInputError, text_check

NAME_MAX = 200  # a run's name, a task id (their columns)
USERNAME_MAX = 150  # Django's username column


class RowRefused(ValueError):
    """A backup line that cannot be restored; the message says why, `kind` what the line is when it says."""

    kind = ""


def _text(row: dict, key: str, *, required: bool, max_length: int = NAME_MAX) -> str | None:
    value = row.get(key)
    if value in (None, ""):
        if required:
            raise RowRefused(f"missing {key}")
        return None
    try:
        return text_check(field=key, value=value, max_length=max_length)
    except TextInputError as exc:
        raise RowRefused(str(exc)) from exc


def _when(row: dict, key: str, *, required: bool = True) -> str | None:
    value = row.get(key)
    if value in (None, "") and not required:
        return None
    try:
        when = datetime.fromisoformat(text_check(field=key, value=value, max_length=64))
    except (TextInputError, ValueError) as exc:
        raise RowRefused(f"{key} {str(value)[:40]!r} is not a time (ISO 8601, as the backup writes it)") from exc
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()


def _record(value: object, key: str, clean, *, required: bool) -> dict | None:
    """A label or final-label record (a history entry's before or after) through its one check."""
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise RowRefused(f"{key} must be a label record (an object)")
    try:
        return clean(value)
    except (ReviewError, TypeError) as exc:
        raise RowRefused(f"{key}: {exc}" if key else str(exc)) from exc


def _label_record(value: dict) -> dict:
    return label_record_clean(verdict=value.get("verdict"), part_overrides=value.get("part_overrides"),
                              note=value.get("note", ""), tags=value.get("tags"))


def _final_record(value: dict) -> dict:
    record = final_label_record_clean(verdict=value.get("verdict"), reason=value.get("reason", ""),
                                      adjudicated=value.get("adjudicated", False))
    record["decided_by"] = _text(value, "decided_by", required=False, max_length=USERNAME_MAX)
    return record


def _label(row: dict) -> dict:
    return {"reviewer": _text(row, "reviewer", required=True, max_length=USERNAME_MAX),
            "record": _record(row, "", _label_record, required=True),
            "created_at": _when(row, "created_at"), "updated_at": _when(row, "updated_at")}


def _label_change(row: dict) -> dict:
    return {"reviewer": _text(row, "reviewer", required=True, max_length=USERNAME_MAX),
            "changed_by": _text(row, "changed_by", required=True, max_length=USERNAME_MAX),
            "before": _record(row.get("before"), "before", _label_record, required=False),
            "after": _record(row.get("after"), "after", _label_record, required=True),
            "changed_at": _when(row, "changed_at")}


def _final_label(row: dict) -> dict:
    try:
        record = final_label_record_clean(verdict=row.get("verdict"), reason=row.get("reason", ""),
                                          adjudicated=row.get("adjudicated", False))
    except ReviewError as exc:
        raise RowRefused(str(exc)) from exc
    return {"record": record, "decided_by": _text(row, "decided_by", required=False, max_length=USERNAME_MAX),
            "decided_at": _when(row, "decided_at")}


def _final_label_change(row: dict) -> dict:
    return {"changed_by": _text(row, "changed_by", required=False, max_length=USERNAME_MAX),
            "before": _record(row.get("before"), "before", _final_record, required=False),
            "after": _record(row.get("after"), "after", _final_record, required=False),
            "changed_at": _when(row, "changed_at")}


_CHECKS = {"label": _label, "label_change": _label_change, "final_label": _final_label,
           "final_label_change": _final_label_change}
assert set(_CHECKS) == set(KINDS)


def backup_line_parse(data: bytes) -> dict | None:
    """One line of the file as the values a restore writes: {kind, run, task_id, ...}; None for a blank line or the
    header; RowRefused saying why for anything else that cannot be restored."""
    if not data.strip():
        return None
    try:
        row = json.loads(data.decode("utf-8").rstrip("\r\n"))
    except UnicodeDecodeError as exc:
        raise RowRefused("not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise RowRefused(f"not JSON ({exc.msg}): a truncated or damaged line") from exc
    kind = row.get("kind") if isinstance(row, dict) else None
    if kind == "header":
        return None
    if kind not in _CHECKS:
        raise RowRefused(f"unknown kind {str(kind)[:40]!r}" if isinstance(row, dict) else "not a backup row (an "
                         "object)")
    try:
        names = {"run": _text(row, "run", required=True), "task_id": _text(row, "task_id", required=True)}
        return {"kind": kind, **names, **_CHECKS[kind](row)}
    except RowRefused as exc:
        exc.kind = kind
        raise
