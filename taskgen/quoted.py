"""The quoted-name rule: what a text quotes is one thing, read the same way wherever a quote matters.

The rules judge keeps a quoted name whole when it cuts a goal into parts (taskgen/providers/rules.py), the propose
stage looks a task's quoted names up on its site (taskgen/stages/propose/keep.py), and the judge's citations look
the values its reasoning quotes up in the evidence (taskgen/citations.py). A quote is “…”, "…", ‘…’, «…», `…`, or
'…' that is not an apostrophe (no letter or digit just outside it), on one line, of 2 to 200 characters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

QUOTED_MIN, QUOTED_MAX = 2, 200
_BODY = f"{{{QUOTED_MIN},{QUOTED_MAX}}}"  # the regex's {2,200}
_PAIRS = (("“", "”"), ('"', '"'), ("‘", "’"), ("«", "»"), ("`", "`"))
QUOTED = re.compile("|".join([*(f"{o}([^{c}\\n]{_BODY}){c}" for o, c in _PAIRS),
                              f"(?<!\\w)'([^'\\n]{_BODY})'(?!\\w)"]))


@dataclass(frozen=True)
class Quoted:
    """One quote: the text inside the marks, and where the whole quote (marks included) starts and ends."""

    text: str
    start: int
    end: int


def quoted_in(text: str) -> list[Quoted]:
    """Every quote in `text`, in order (see the module's rule)."""
    return [Quoted(next(g for g in m.groups() if g is not None), m.start(), m.end()) for m in QUOTED.finditer(text)]
