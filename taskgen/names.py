"""The safe task-id check: one rule for every place a task id (or a run name) becomes a folder name.

Import, attempt, the harness's run dir and the export all write `<dir>/<task_id>/`; a task id that could climb out
of that folder (a separator, NUL, `..`, a leading dot) is refused everywhere by this one function.
"""
from __future__ import annotations

import re

PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}", re.ASCII)


def is_plain_name(value: object) -> bool:
    """True for a task id (or run name) that is safe as one folder name: letters, digits, `_ . -`, not leading `.`."""
    return isinstance(value, str) and PLAIN_NAME.fullmatch(value) is not None
