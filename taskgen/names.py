"""The plain-name rule: one rule for every name that becomes a folder, a file or a command argument.

Task ids (import, attempt, the harness's run dir, the judge dir, the export), run names (attempt, the approved
tasks file), an external harness's name and its arm all follow it. A plain name cannot climb out of its folder (no
separator, NUL or `..`), is not hidden (no leading `.`), cannot be mistaken for the export's own files beside the
task folders (`_report.json`, `_manifest.json`, `_certificate.json`: no leading `_`) nor read as an option by a
harness command (no leading `-`), and fits the columns that keep it (200 characters).
"""
from __future__ import annotations

import re

PLAIN_NAME_MAX = 200
PLAIN_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{PLAIN_NAME_MAX - 1}}}", re.ASCII)
PLAIN_NAME_RULE = f"letters, digits, _ . - (a letter or digit first), at most {PLAIN_NAME_MAX} characters"


class NotPlainName(ValueError):  # noqa: N818  (the name of what it refuses)
    """A name that is not plain; the message names it (cut to 80 characters) and states the rule."""


def is_plain_name(value: object) -> bool:
    """True for a name that is safe as one folder name, file name or command argument (see the module's rule)."""
    return isinstance(value, str) and PLAIN_NAME.fullmatch(value) is not None


def plain_name_check(value: object, *, what: str) -> str:
    """`value` when it is a plain name; NotPlainName saying `what` it is and the rule otherwise."""
    if not is_plain_name(value):
        shown = repr(value[:80]) if isinstance(value, str) else repr(value)[:80]
        raise NotPlainName(f"{what} {shown} is not a plain name ({PLAIN_NAME_RULE})")
    return value
