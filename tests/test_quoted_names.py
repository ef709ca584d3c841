"""One quoted-name rule (taskgen/quoted.py) for the three readers that had a copy each: the rules judge keeps a
quoted name whole when it cuts a goal into parts, the propose stage looks a task's quoted names up on its site, and
the judge's citations look up the values its reasoning quotes. The copies had drifted: «…» was a name to the judge
and the proposer but not to the citations, `…` only to the citations, and a quote of 161 to 200 characters was a
name to the proposer and not a citation."""
from __future__ import annotations

import pytest

from taskgen.citations import EvidenceIndex, citations_in
from taskgen.providers.rules import goal_parts
from taskgen.quoted import quoted_in
from taskgen.stages.propose.keep import named_items

NAME = "Chambre Bleue, Reykjavík"
LONG = "Suite " + "x" * 180  # 186 characters: the citations' copy stopped at 160
MARKS = ["“{}”", '"{}"', "‘{}’", "«{}»", "`{}`", "'{}'"]


def _cited(reasoning: str, found_in: str) -> list[str]:
    ev = EvidenceIndex.from_fields(request_log=[], data_changes=[], actions=[], answer="", screen_text=[found_in])
    return [c.written.strip('"') for c in citations_in(reasoning, ev) if c.kind == "value" and c.anchor]


@pytest.mark.parametrize("mark", MARKS)
@pytest.mark.parametrize("name", [NAME, LONG])
def test_every_reader_takes_a_quote_as_one_name(mark, name):
    quoted = mark.format(name)
    assert [q.text for q in quoted_in(f"Book {quoted} then pay")] == [name]
    assert any(name in part for part in goal_parts(f"Book the room {quoted}, then pay by card"))  # not cut at its comma
    assert name in named_items(f"Book the room {quoted} for two nights")
    assert _cited(f"The screen shows {quoted}.", found_in=f"Room {name} booked") == [name[:60]]


@pytest.mark.parametrize("text", ["it's Anna's room", 'a "x" mark', "“" + "y" * 201 + "”", '"two\nlines"'])
def test_an_apostrophe_a_single_letter_an_overlong_or_a_broken_quote_is_no_name_to_any_reader(text):
    assert quoted_in(text) == []
    assert named_items(text) == [] or all(n not in ("x", "two\nlines") for n in named_items(text))
    assert _cited(f"the page says {text}", found_in=text) == []
