"""A selection rule's reasons for a chunk's rows, worked out row by row only where a row is not plain (select.py:
_Rule.reasons), are the reasons `_Rule.reason` gives each row, for every source and option: random chunks of labelled,
judged, verifier-failed episodes in every mix."""
from __future__ import annotations

import itertools
import random

import pytest

from taskgen.models import Export, LabelVerdict
from taskgen.stages.export.order import Chunk, ChunkRow
from taskgen.stages.export.select import SOURCES, _Rule

RULES = [_Rule(source=source, include_reviewer_rejected=rejected, include_verifier_failed=failed, exclude_risk=(),
               labels_ignored=ignored)
         for source, rejected, failed, ignored in itertools.product(SOURCES, *[(False, True)] * 3)]


def random_chunk(rng: random.Random, size: int = 300) -> Chunk:
    ids = rng.sample(range(1, 10 * size), size)
    finals = {pk: (rng.choice(list(LabelVerdict.values)), rng.random() < 0.3) for pk in ids if rng.random() < 0.4}
    judge_yes = {pk for pk in ids if rng.random() < 0.7}
    human_yes = {pk for pk, (verdict, _) in finals.items() if verdict == LabelVerdict.SUCCESS}
    approvable = [pk for pk in ids if pk in judge_yes or pk in human_yes]  # what _chunk keeps as rows
    rows = [ChunkRow(pk, n, f"t-{pk}", "site", True, 2, "h") for n, pk in enumerate(approvable)]
    failed = {pk for pk in approvable if rng.random() < 0.2}
    return Chunk(rows, finals, judge_yes, failed, config_id=1, positions=size)


@pytest.mark.parametrize("seed", range(20))
def test_a_rules_reasons_for_a_chunk_are_its_reason_for_each_row(seed):
    chunk = random_chunk(random.Random(seed))
    for rule in RULES:
        assert rule.reasons(chunk) == [rule.reason(row, chunk) for row in chunk.rows], rule


def test_plain_rows_are_left_out_of_a_human_export_and_taken_by_the_others():
    chunk = Chunk([ChunkRow(7, 0, "t-7", "site", True, 2, "h")], finals={}, judge_yes={7}, failed=set(), config_id=1)
    for rule in RULES:
        expected = "unapproved" if rule.source == Export.Selection.HUMAN else None
        assert rule.reasons(chunk) == [expected], rule
