"""Certify an export: of the episodes an export would write, what share are real successes, with a one-sided lower
bound that holds however long the researcher labels (bound.py), the next episodes to label in the design's order
(design.py), the labels likely still needed, and the same for each cut of the riskiest strata.

`certificate_compute` is the one function the command (`taskgen certify`), the pages and the export gate call.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from taskgen.models import CertifyDesign, Episode, Export, JudgeConfig, Judgment, Run
from taskgen.stages.certify.bound import (
    METHOD,
    METHOD_REFERENCE,
    StratumCount,
    allocate_next,
    labels_needed,
    successes_estimate,
    successes_lower,
    successes_upper,
)
from taskgen.stages.certify.design import Design, design_build, design_seed, judged_design
from taskgen.stages.certify.target import SOURCES, CertifyError
from taskgen.stages.export.order import SelectContext
from taskgen.stages.export.select import ExportError, Selection, export_select
from taskgen.stages.validate.summary import summary_and_risks_refresh, summary_available
from taskgen.triage.risk import RISK_NAMES, RISK_WORDS

COUNTED = ("A label counts when the design drew it: each stratum's episodes are labelled in a random order fixed "
           "by the seed, the strata served in turn by the design's rule, and the labels it has reached in that walk "
           "are a random sample. Labels given elsewhere (the false-positive audit serves the riskiest first; "
           "browsing) wait until the walk reaches them; a stratum labelled in full is a census. A label that moved "
           "an episode in or out of the export (a Not success leaves it) is counted exactly.")


@dataclass(frozen=True)
class CertifyParams:
    """What a certificate is about (the export's parameters) and what it must show."""

    run: Run
    judge_config: JudgeConfig
    source: str = Export.Selection.JUDGE
    exclude_risk: tuple[str, ...] = ()
    budget: object = None
    include_reviewer_rejected: bool = False
    include_verifier_failed: bool = False
    target: float = 0.9
    confidence: float = 0.95
    min_reviewer_accuracy: float | None = None  # leave out the labels of reviewers below this accuracy

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise CertifyError(f"a certificate is for the judge's choice: source judge or human-over-judge, "
                               f"not {self.source!r}")
        for name, value in (("target", self.target), ("confidence", self.confidence)):
            if not isinstance(value, int | float) or not 0 < value < 1:
                raise CertifyError(f"the {name} must be a number between 0 and 1, not {value!r}")


@dataclass
class _Adjustment:
    """What labels changed between the frame and the population: episodes out (rejected, or pushed past the
    budget) and in (a human success beside the judge, a freed budget)."""

    unknown_out: int = 0  # left the population with their truth unknown or true: the bound assumes each a success
    known_true_in: int = 0  # entered it with a human success: certain
    estimate_shift: float | None = 0.0
    labels: list[dict] = field(default_factory=list)


def _rate(design: Design, stratum_name: str) -> float | None:
    count = next(s.count for s in design.strata if s.name == stratum_name)
    return count.successes / count.labelled if count.labelled else None


def _adjustment(design: Design) -> _Adjustment:
    out = np.setdiff1d(design.frame, design.population).tolist()  # sorted
    came_in = np.setdiff1d(design.population, design.frame).tolist()
    adjust = _Adjustment()
    for pk, sign in [(pk, -1) for pk in out] + [(pk, 1) for pk in came_in]:
        truth = design.truths.get(pk, (None, ""))[0]
        if sign < 0 and truth is not False:
            adjust.unknown_out += 1
        if sign > 0 and truth is True:
            adjust.known_true_in += 1
        guess = float(truth) if truth is not None else _rate(design, design.stratum_of(pk))
        adjust.estimate_shift = None if guess is None or adjust.estimate_shift is None else \
            adjust.estimate_shift + sign * guess
        if truth is not None:
            adjust.labels.append({"episode_id": pk, "moved": "out" if sign < 0 else "in", "success": truth})
    return adjust


def _lower_share(counts: list[StratumCount], adjust: _Adjustment, population: int, confidence: float) -> float | None:
    if not population:
        return None
    lower = successes_lower(counts, confidence=confidence) - adjust.unknown_out + adjust.known_true_in
    return max(0, lower) / population


def _labels_still_needed(design: Design, adjust: _Adjustment, params: CertifyParams) -> int | None:
    size = len(design.population)
    return _labels_for_target(tuple(design.counts()), adjust.unknown_out, adjust.known_true_in, size,
                              params.target, params.confidence) if size else None


@lru_cache(maxsize=256)
def _labels_for_target(counts: tuple[StratumCount, ...], unknown_out: int, known_true_in: int, size: int,
                       target: float, confidence: float) -> int | None:
    """The forecast of labels still needed, a pure function of the counts (kept per process: it asks the bound
    about twenty times, and the counts change only when a label extends the design's walk)."""
    adjust = _Adjustment(unknown_out=unknown_out, known_true_in=known_true_in)

    def reached(projected: list[StratumCount]) -> bool:
        rejected = sum((p.labelled - c.labelled) - (p.successes - c.successes) for p, c in zip(projected, counts,
                                                                                            strict=True))
        share = _lower_share(projected, adjust, size - rejected, confidence)
        return share is not None and share >= target

    return labels_needed(counts, reached=reached)


def _next_episodes(design: Design, count: int) -> tuple[list[int], list[int]]:
    """The next `count` episodes to label in the design's order, and those waiting for an adjudicator first."""
    waiting, queues = [], []
    for stratum in design.strata:
        rest = stratum.order[stratum.count.labelled:].tolist()
        waiting += [pk for pk in rest[:1] if pk in design.truths and design.truths[pk][0] is None]
        unlabelled = (pk for pk in rest if pk not in design.truths)
        queues.append(unlabelled)  # read lazily: a few of a stratum's episodes are taken
    picked: list[int] = []
    for h in allocate_next(design.counts(), count=count * 2):
        if len(picked) < count:
            picked += itertools.islice(queues[h], 1)
    return picked, waiting


def _labels_used(design: Design, adjust: _Adjustment) -> list[dict]:
    """Every label the certificate rests on, with the probability the design gave it (n_h / N_h in its stratum);
    a label that moved an episode in or out of the population counts exactly (probability 1)."""
    used = []
    for stratum in design.strata:
        for position, pk in enumerate(stratum.order[:stratum.count.labelled].tolist()):
            used.append({"episode_id": pk, "stratum": stratum.name, "position": position,
                         "verdict": design.truths[pk][1], "probability": round(stratum.inclusion_probability, 6)})
    return used + [{**label, "probability": 1.0} for label in adjust.labels]


def labels_sha256(used: list[dict]) -> str:
    return hashlib.sha256(json.dumps(used, sort_keys=True).encode()).hexdigest()


def _task_ids(ids: list[int]) -> list[str]:
    names = dict(Episode.objects.filter(pk__in=ids).values_list("pk", "task__task_id"))
    return [names[pk] for pk in ids]


def certificate_of(*, selection: Selection, params: CertifyParams, seed: int, next_count: int = 20,
                   context: SelectContext | None = None) -> dict:
    """The certificate of exactly the episodes `selection` writes."""
    design = design_build(selection=selection, seed=seed, context=context,
                          min_reviewer_accuracy=params.min_reviewer_accuracy)
    adjust = _adjustment(design)
    counts, size = design.counts(), len(design.population)
    lower = _lower_share(counts, adjust, size, params.confidence)
    frame_estimate = successes_estimate(counts)
    estimate = None if frame_estimate is None or adjust.estimate_shift is None or not size else \
        min(1.0, max(0.0, (frame_estimate + adjust.estimate_shift) / size))
    used = _labels_used(design, adjust)
    nxt, waiting = _next_episodes(design, next_count)
    return {
        "run": selection.run.name, "judge_config": selection.judge_config.key, "source": selection.source,
        "exclude_risk": list(selection.exclude_risk), "budget": selection.budget, "steps": selection.rows,
        "population": size, "frame": len(design.frame), "left_out": selection.left_out_words(),
        "labels": sum(c.labelled for c in counts), "labels_not_counted": sum(s.beyond for s in design.strata),
        "estimate": None if estimate is None else round(estimate, 4),
        "lower": None if lower is None else round(lower, 4),
        "target": params.target, "confidence": params.confidence,
        "min_reviewer_accuracy": params.min_reviewer_accuracy,
        "certified": lower is not None and lower >= params.target,
        "labels_needed": _labels_still_needed(design, adjust, params),
        "method": METHOD, "reference": METHOD_REFERENCE, "seed": seed,
        "labels_sha256": labels_sha256(used), "labels_used": used,
        "strata": [{"name": s.name, "words": RISK_WORDS[s.name], "episodes": s.count.size,
                    "labelled": s.count.labelled, "successes": s.count.successes, "not_counted": s.beyond,
                    "probability": round(s.inclusion_probability, 4)} for s in design.strata if s.count.size],
        "next": _task_ids(nxt), "next_episode_ids": nxt, "waiting_for_adjudication": _task_ids(waiting),
        "counted": COUNTED,
    }


def _select(params: CertifyParams, exclude_risk: tuple[str, ...], context: SelectContext) -> Selection:
    try:
        return export_select(run=params.run, source=params.source, judge_config=params.judge_config,
                             budget=params.budget, exclude_risk=exclude_risk, context=context, stop_at_budget=True,
                             include_reviewer_rejected=params.include_reviewer_rejected,
                             include_verifier_failed=params.include_verifier_failed)
    except ExportError as exc:
        raise CertifyError(str(exc)) from exc


def certificate_compute(*, params: CertifyParams, next_count: int = 20, cuts: bool = False, user=None) -> dict:
    """The certificate of the export `params` describes, and with `cuts` the same for each choice of leaving the
    riskiest strata out (each bound recomputed on its own population)."""
    seed = design_seed(run=params.run, judge_config=params.judge_config, user=user)
    if summary_available():  # first, so the export order's signature is the summary's one row (order.py: _summed)
        summary_and_risks_refresh()
    context = SelectContext(names=False)  # the run read once for the population, the frame and every cut
    certificate = certificate_of(selection=_select(params, params.exclude_risk, context), params=params, seed=seed,
                                 next_count=next_count, context=context)
    if cuts:  # every cut is computed (a fixed number of queries); those that cut nothing more are not shown
        present = {s["name"] for s in certificate["strata"]}
        rows = [_cut_row(params, RISK_NAMES[:k], seed, context) for k in range(len(RISK_NAMES) + 1)]
        certificate["cuts"] = [{**row, "exclude_risk": [r for r in row["exclude_risk"] if r in present]}
                               for k, row in enumerate(rows) if k == 0 or RISK_NAMES[k - 1] in present]
    return certificate


def _cut_row(params: CertifyParams, cut: tuple[str, ...], seed: int, context: SelectContext) -> dict:
    cert = certificate_of(selection=_select(params, cut, context), params=params, seed=seed, next_count=0,
                          context=context)
    keep = ("population", "steps", "budget", "labels", "estimate", "lower", "certified", "labels_needed")
    return {"exclude_risk": list(cut), **{key: cert[key] for key in keep}}


def certificate_summary(certificate: dict) -> dict:
    """What a manifest and `_certificate.json` keep: enough to check the certificate later against the labels."""
    keys = ("run", "judge_config", "source", "exclude_risk", "budget", "min_reviewer_accuracy", "population", "frame",
            "labels", "estimate",
            "lower", "target", "confidence", "certified", "method", "reference", "seed", "labels_sha256",
            "labels_used", "strata")
    return {key: certificate[key] for key in keys}


def certificate_gate(*, selection: Selection, target: float, confidence: float = 0.95, user=None) -> dict:
    """The certificate of exactly the episodes `selection` writes, as a manifest keeps it; a CertifyError saying how
    many more labels are likely needed (and where to give them) when its lower bound is below `target`."""
    if selection.judge_config is None or selection.source not in SOURCES:
        raise CertifyError("a certificate needs the judge's choice: source judge or human-over-judge, with a judge "
                           "config")
    params = CertifyParams(run=selection.run, judge_config=selection.judge_config, source=selection.source,
                           exclude_risk=selection.exclude_risk, budget=selection.budget, target=target,
                           confidence=confidence, include_reviewer_rejected=selection.include_reviewer_rejected,
                           include_verifier_failed=selection.include_verifier_failed)
    seed = design_seed(run=selection.run, judge_config=selection.judge_config, user=user)
    certificate = certificate_of(selection=selection, params=params, seed=seed, next_count=0)
    if not certificate["certified"]:
        raise CertifyError(gate_refusal_words(certificate))
    return certificate_summary(certificate)


def gate_refusal_words(certificate: dict) -> str:
    lower = certificate["lower"] or 0.0
    need = certificate["labels_needed"]
    more = (f"about {need} more label{'s are' if need != 1 else ' is'} likely needed in the design's order"
            if need else "the target is out of reach with these episodes: leave the riskiest strata out (see the "
                         "cuts on the certificate)")
    return (f"not certified: the {certificate['confidence']:.0%} lower bound on the precision of the "
            f"{certificate['population']} episodes to write is {lower:.3f}, below the {certificate['target']} asked "
            f"for ({certificate['labels']} labels used); {more}. Label them in the Certify queue of "
            f"{certificate['run']} or see `taskgen certify {certificate['run']}`; nothing was written.")


JUDGED_FAILURES_WORDS = ("No random design labels the judged failures (the Certify queue serves judged successes): "
                         "labels of judged failures were chosen by hand or by risk, so the rate of missed successes, "
                         "the success rate and recall are not estimated from them.")


def design_precision(*, runs: list[Run], config: JudgeConfig, target_half_width: float = 0.03,
                     confidence: float = 0.95) -> dict:
    """The precision of the config's judged successes in the runs, from the labels the certify design drew
    (validate's sample estimate: a label counts only with the probability the design gave it). Runs without a
    design yet (nobody opened their Certify queue) count their episodes with no label; the runs' bounds are combined
    by Bonferroni (each at 1 - alpha / (2 runs), two-sided)."""
    level = 1 - (1 - confidence) / (2 * max(1, len(runs)))
    total = labelled = successes = not_counted = lower = upper = more = 0
    estimate: float | None = 0.0
    for run in runs:
        seed = CertifyDesign.objects.filter(run=run, judge_config=config).values_list("seed", flat=True).first()
        design = None if seed is None else judged_design(run=run, judge_config=config, seed=seed)
        size = len(design.frame) if design else Judgment.objects.filter(
            episode__run=run, config=config, verdict=Judgment.Verdict.SUCCESS).count()  # the design's frame: the same
        total += size
        if design is None or not size:
            estimate, upper = None if size else estimate, upper + size
            continue
        counts, frame = design.counts(), len(design.frame)
        labelled += sum(c.labelled for c in counts)
        successes += sum(c.successes for c in counts)
        not_counted += sum(s.beyond for s in design.strata)
        lower += successes_lower(counts, confidence=level, bet_from=0.0) * size / frame
        upper += successes_upper(counts, confidence=level, bet_from=0.0) * size / frame
        found = successes_estimate(counts)
        estimate = None if found is None or estimate is None else estimate + found * size / frame
        more += _labels_for_half_width(tuple(counts), frame, level, target_half_width) or 0
    ci = (round(lower / total, 4), round(min(upper, total) / total, 4)) if total and labelled else None
    return {"design": True, "method": METHOD, "judged_success": {"population": total, "labelled": labelled,
                                                                 "true_successes": successes},
            "labels_not_counted": not_counted,
            "precision": None if estimate is None or not total or not labelled else round(estimate / total, 4),
            "precision_ci": ci, "precision_half_width": None if ci is None else round((ci[1] - ci[0]) / 2, 4),
            "target_half_width": target_half_width, "more_labels_needed": more, "judged_failures": None,
            "judged_failures_words": JUDGED_FAILURES_WORDS}


@lru_cache(maxsize=256)
def _labels_for_half_width(counts: tuple[StratumCount, ...], frame: int, level: float, half_width: float
                           ) -> int | None:
    """The forecast of labels until the precision's interval is this narrow: a pure function of the counts, kept
    per process like `_labels_for_target`."""
    def reached(projected: list[StratumCount]) -> bool:
        spread = successes_upper(projected, confidence=level, bet_from=0.0) - successes_lower(
            projected, confidence=level, bet_from=0.0)
        return spread / (2 * frame) <= half_width

    return labels_needed(list(counts), reached=reached)
