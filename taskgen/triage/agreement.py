"""Agreement of the judge with the truth there is: the final human label when it decided, else the verifier.

One rule, two readers: the run table's SQL (review/run_table.py) and the validate summary's cells
(review/run_table_groups.py) both read AGREEMENT, so a row and its group can never name it differently."""
from __future__ import annotations

from taskgen.models import Judgment, LabelVerdict

S, NS = Judgment.Verdict.SUCCESS, Judgment.Verdict.NOT_SUCCESS

# Each row: its words, where the truth comes from, and the (judge verdict, truth) pairs it holds; the first row that
# holds wins (a decided final label is read before the verifier).
LABEL_S, LABEL_NS = LabelVerdict.SUCCESS, LabelVerdict.NOT_SUCCESS
AGREEMENT = (
    ("false positive (final label)", "final", ((S, LABEL_NS),)),
    ("false positive (verifier)", "verifier", ((S, False),)),
    ("false negative (final label)", "final", ((NS, LABEL_S),)),
    ("false negative (verifier)", "verifier", ((NS, True),)),
    ("agrees with the final label", "final", ((S, LABEL_S), (NS, LABEL_NS))),
    ("agrees with the verifier", "verifier", ((S, True), (NS, False))),
)
UNKNOWN = len(AGREEMENT)


def agreement_of(verdict: str | None, verifier_ok: bool | None, final: str) -> int:
    """The AGREEMENT position of a judge verdict, a verifier result (None: none) and a final label ("" none)."""
    decided = final in (LABEL_S, LABEL_NS)
    for n, (_, source, pairs) in enumerate(AGREEMENT):
        truth = final if source == "final" else (None if decided else verifier_ok)
        if (verdict, truth) in pairs:
            return n
    return UNKNOWN


def agreement_text(code: int | None) -> str:
    """The words of an AGREEMENT position; "" for none."""
    return AGREEMENT[code][0] if code is not None and 0 <= code < UNKNOWN else ""
