"""Hand-made episodes with known (truth, verdict) pairs for the validate tests."""
from __future__ import annotations

from taskgen.models import FinalLabel, Label, VerifierResult
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, TaskFactory

CELL_PAIRS = {"tp": (True, "SUCCESS"), "fp": (False, "SUCCESS"), "fn": (True, "NOT SUCCESS"),
              "tn": (False, "NOT SUCCESS")}


def make_episode(*, run, site, kind="info", truth=None, verdict=None, config=None, cost="0", final=None):
    """One episode; truth True/False sets a verifier result, verdict (SUCCESS/NOT SUCCESS/NONE) a judgment."""
    episode = EpisodeFactory(run=run, task=TaskFactory(site=site, task_kind=kind))
    if truth is not None:
        VerifierResult.objects.create(episode=episode, ok=truth, source="results.jsonl")
    if verdict is not None:
        JudgmentFactory(episode=episode, config=config or JudgeConfigFactory(), verdict=verdict, cost_usd=cost)
    if final is not None:
        FinalLabel.objects.create(episode=episode, verdict=final)
    return episode


def make_cells(*, run, config, site, kind="info", cost="0", **cells: int) -> list:
    """`tp=3, fp=2, ...`: that many episodes of each confusion cell, judged by `config`."""
    made = []
    for cell, count in cells.items():
        truth, verdict = CELL_PAIRS[cell]
        made += [make_episode(run=run, site=site, kind=kind, truth=truth, verdict=verdict, config=config, cost=cost)
                 for _ in range(count)]
    return made


def reference_validate(pairs: list[tuple[bool, bool]]) -> dict:
    """The reference's cmd_validate arithmetic, written again from its text, over (verifier ok, judge says success)."""
    tp = sum(v and j for v, j in pairs)
    fp = sum(j and not v for v, j in pairs)
    fn = sum(v and not j for v, j in pairs)
    tn = sum(not v and not j for v, j in pairs)
    n = len(pairs)
    return {"episodes": n, "agreement": round((tp + tn) / max(1, n), 3), "verifier_pass": tp + fn,
            "judge_pass": tp + fp, "precision": round(tp / max(1, tp + fp), 3),
            "recall": round(tp / max(1, tp + fn), 3), "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def label(episode, reviewer, verdict: str) -> Label:
    return Label.objects.create(episode=episode, reviewer=reviewer, verdict=verdict)

