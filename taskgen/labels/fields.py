"""What a label and a final label may hold: the one check of their fields, for a reviewer's post, an adjudication
and every row a labels restore writes (review/labels_restore.py), so a backup can never store what a reviewer could
not. Text goes through the app's one text rule (taskgen/text_input.py: no NUL, a length cap); the caps are said on
the forms."""
from __future__ import annotations

from taskgen.models import LabelVerdict
from taskgen.text_input import TextInputError, text_check

NOTE_MAX = 5000  # a label's note: about a page
TAG_MAX = 60  # one tag (longer ones are cut, as they always were)
TAGS_MAX = 20
PARTS_MAX = 200  # part overrides: indexes into a judgment's parts
REASON_MAX = 2000  # an adjudication's reason
QUEUE_NAME_MAX = 200  # Queue.name's column


class ReviewError(ValueError):
    """A label, adjudication or queue request that cannot be carried out; the message says why. `field` names the
    form field when it holds what no form of the app sends (a NUL, text over its cap, a list that is not one): the
    views answer 400 for those, and show the others (no verdict chosen, no reason given) beside the form."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def review_text(*, field: str, value: object, max_length: int | None) -> str:
    """`taskgen.text_input.text_check` as a ReviewError naming the field."""
    try:
        return text_check(field=field, value=value, max_length=max_length)
    except TextInputError as exc:
        raise ReviewError(str(exc), field=exc.field) from exc


def verdict_check(verdict: object) -> str:
    if verdict not in LabelVerdict.values:
        shown = repr(verdict)[:40]
        raise ReviewError(f"unknown verdict {shown}: use one of {', '.join(LabelVerdict.values)}")
    return verdict


def _tags(tags: object) -> list[str]:
    if not isinstance(tags, list | tuple):
        raise ReviewError("tags must be a list of words", field="tags")
    seen: list[str] = []
    for tag in tags:
        tag = " ".join(review_text(field="tags", value=tag, max_length=None).split())[:TAG_MAX]
        if tag and tag not in seen:
            seen.append(tag)
    if len(seen) > TAGS_MAX:
        raise ReviewError(f"{len(seen)} tags: at most {TAGS_MAX}", field="tags")
    return seen


def _parts(parts: object) -> list[int]:
    if not isinstance(parts, list | tuple):
        raise ReviewError("part_overrides must be a list of part numbers", field="part_overrides")
    numbers = set()
    for part in parts:
        text = str(part)
        if isinstance(part, bool) or not text.isdigit() or len(text) > 6:
            raise ReviewError(f"part_overrides: {text[:20]!r} is not a part number", field="part_overrides")
        numbers.add(int(text))
    if len(numbers) > PARTS_MAX:
        raise ReviewError(f"{len(numbers)} part overrides: at most {PARTS_MAX}", field="part_overrides")
    return sorted(numbers)


def label_record_clean(*, verdict: object, part_overrides: object = None, note: object = "",
                       tags: object = None) -> dict:
    """A label's content as it is stored (`Label.as_record()`), or ReviewError naming the field: the verdict one of
    LabelVerdict, the note text of at most NOTE_MAX characters, tags and part numbers lists."""
    return {"verdict": verdict_check(verdict), "part_overrides": _parts(part_overrides or []),
            "note": review_text(field="note", value=note, max_length=NOTE_MAX).strip(), "tags": _tags(tags or [])}


def final_label_record_clean(*, verdict: object, reason: object = "", adjudicated: object = False) -> dict:
    """A final label's verdict, reason and adjudicated flag as stored, or ReviewError naming the field; an
    adjudicated final label needs a reason."""
    reason = review_text(field="reason", value=reason, max_length=REASON_MAX).strip()
    if not isinstance(adjudicated, bool):
        raise ReviewError("adjudicated must be true or false", field="adjudicated")
    if adjudicated and not reason:
        raise ReviewError("say why: an adjudication needs a reason")
    return {"verdict": verdict_check(verdict), "reason": reason, "adjudicated": adjudicated}
