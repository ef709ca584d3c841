"""Selecting an export: which approved episodes become training rows, in which order, up to a step budget.

The rules are the reference's `rows` stage: sites interleaved round robin (sites sorted by name, each site's tasks in
file order), whole episodes, a candidate counted before an empty episode is skipped, and episodes skipped once the
rows so far reach the budget (so the last episode taken may pass it). What counts as approved depends on the source:
judge successes (the reference), final human labels, or human labels over judge verdicts. An episode without rows,
or with an adjudicated NOT SUCCESS, is never exported.

What a researcher has already rejected stays out (issue 22): a final human label of Not success, and a failed
verifier, keep an episode out of every export unless the researcher asks for them in so many words
(`include_reviewer_rejected`, `include_verifier_failed`). `export_select` is the one home of this rule: it returns
the episodes picked and, for every episode the source (or the judge) approves that is not picked, why (`left_out`),
so the export form, `taskgen rows` and the certificate's population all read the same selection.

Writing the folder and the .tar.gz lives in `output`; this module only reads the database.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from django.conf import settings

from taskgen.models import Export, JudgeConfig, Judgment, LabelVerdict, Run, Screenshot
from taskgen.stages.export.order import LAST_CHUNK, Chunk, ChunkRow, SelectContext, export_order, order_chunks
from taskgen.triage.risk import RiskError, risk_names_check

MANIFEST_FORMAT = "taskgen-rows-manifest/1"
SOURCES = [choice.value for choice in Export.Selection]

# Why an approved episode is not exported, in the order the reasons are checked (an episode counts under its first).
LEFT_OUT_WHY = {
    "adjudicated": "an adjudicator decided Not success",
    "reviewers": "reviewers labelled it Not success",
    "unsure": "its final label is Unsure, which overrides the judge",
    "verifier": "the verifier failed it",
    "risk": "it holds a risk the export leaves out",
    "no_rows": "it has no rows folder",
    "empty": "its rows file is empty",
    "budget": "the step budget was reached before it",
}
# What the source approves, in the words of "N judged successes: ..."
CONSIDERED_WORDS = {Export.Selection.JUDGE: "judged successes", Export.Selection.HUMAN: "human successes",
                    Export.Selection.HUMAN_OVER_JUDGE: "judged or human successes"}


class ExportError(ValueError):
    """Bad export parameters (budget, source, judge config, folder): nothing was written."""


class Candidate(NamedTuple):
    """One approved episode with rows, in export order (a tuple: a certificate makes tens of thousands of them, and a
    frozen dataclass's __init__ was a tenth of its Python)."""

    episode_id: int
    task_id: str
    site: str
    task_order: int
    rows: int
    content_hash: str


@dataclass
class Selection:
    """The outcome of selecting: the parameters, how many candidates there were, and the episodes picked."""

    run: Run
    source: str
    judge_config: JudgeConfig | None
    budget: int
    include_reviewer_rejected: bool = False
    include_verifier_failed: bool = False
    exclude_risk: tuple[str, ...] = ()
    order_from: str = "episodes"
    candidates: int = 0
    picked: list[Candidate] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # reason (a LEFT_OUT_WHY key) -> episodes
    named: bool = True  # False: selected for a certificate (SelectContext.names), its candidates without task ids

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.picked)

    @property
    def considered(self) -> int:
        """The episodes the source (or, beside a human source, the judge) approves: picked or left out."""
        return len(self.picked) + sum(self.left_out.values())

    def params(self) -> dict:
        """The parameters that decide the episode list (no folder, no time: same parameters, same manifest)."""
        return {"run": self.run.name, "run_id": self.run.pk, "source": self.source,
                "judge_config": self.judge_config.key if self.judge_config else None, "budget": self.budget,
                "include_reviewer_rejected": self.include_reviewer_rejected,
                "include_verifier_failed": self.include_verifier_failed, "exclude_risk": list(self.exclude_risk),
                "order_from": self.order_from}

    def left_out_words(self) -> str:
        return left_out_words(source=self.source, exported=len(self.picked), left_out=self.left_out)


def left_out_words(*, source: str, exported: int, left_out: dict[str, int]) -> str:
    """What an export takes and leaves out, and why, in one sentence: "16 judged successes: 6 exported; left out:
    6 (reviewers labelled it Not success), 4 (the verifier failed it)." """
    head = f"{exported + sum(left_out.values()):,} {CONSIDERED_WORDS[source]}: {exported:,} exported"
    if not left_out:
        return head + ", none left out."
    # in LEFT_OUT_WHY's order, whatever the dict's: a stored manifest's comes back from jsonb in an order of its own
    reasons = [f"{left_out[why]:,} ({words})" for why, words in LEFT_OUT_WHY.items() if left_out.get(why)]
    return f"{head}; left out: " + ", ".join(reasons) + "."


def manifest_left_out_words(manifest: dict) -> str:
    """The sentence of `left_out_words` for a written manifest ("" for one made before issue 22: no reasons kept)."""
    if "left_out" not in manifest:
        return ""
    return left_out_words(source=manifest["params"]["source"], exported=len(manifest["episodes"]),
                          left_out=manifest["left_out"])


def export_budget_check(value: object) -> int:
    """The budget as a positive whole number of steps, or an ExportError saying what was wrong."""
    if isinstance(value, bool):
        raise ExportError(f"the budget must be a positive whole number of steps, not {value!r}")
    try:
        budget = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ExportError(f"the budget must be a positive whole number of steps, not {value!r}") from None
    if budget <= 0:
        raise ExportError(f"the budget must be a positive whole number of steps, not {budget}")
    return budget


def export_source_check(*, source: str, judge_config: JudgeConfig | None) -> None:
    """The source is one we know, and a judge-based source names the judge config whose verdicts it uses."""
    if source not in SOURCES:
        raise ExportError(f"unknown source {source!r}: use one of {', '.join(SOURCES)}")
    if source != Export.Selection.HUMAN and judge_config is None:
        raise ExportError(f"the {source} source needs a judge config (whose verdicts to use)")


def export_judge_config_default(*, run: Run) -> JudgeConfig:
    """Whose verdicts an export of the run uses when none is named: the only judge config that judged it. An
    ExportError names them when there are several, and says so when there are none."""
    used = list(JudgeConfig.objects.filter(pk__in=Judgment.objects.filter(episode__run=run).values("config"))
                .order_by("pk"))
    if len(used) == 1:
        return used[0]
    if not used:
        raise ExportError(f"run {run.name} has no verdicts yet: judge it first, or export by the final human labels")
    raise ExportError(f"run {run.name} has verdicts of {len(used)} judge configs "
                      f"({', '.join(c.key for c in used)}): say whose verdicts to use")


def report_sites(task_ids: list[str]) -> int:
    """The reference's `sites` figure, computed from task ids as it does (<prefix>-<site>-<n>); an id without a dash
    (which the reference would crash on) counts as its own site."""
    names = set()
    for task_id in task_ids:
        name = task_id.split("-", 1)[1] if "-" in task_id else task_id
        names.add(name.rsplit("-", 1)[0])
    return len(names)


def export_include_check(*, source: str, include_reviewer_rejected: bool) -> None:
    """Reviewers' Not success can be overridden only where the judge is the source: the human sources are the
    reviewers' word (an ExportError otherwise)."""
    if include_reviewer_rejected and source != Export.Selection.JUDGE:
        raise ExportError(f"the {source} source follows the reviewers' labels: including the episodes they labelled "
                          "Not success applies to the judge source only")


def _label_reason(verdict: str | None, adjudicated: bool, *, source: str,
                  include_reviewer_rejected: bool) -> str | None:
    """The reason a final label keeps an approved episode out, or None."""
    if verdict == LabelVerdict.NOT_SUCCESS and (adjudicated or not include_reviewer_rejected):
        return "adjudicated" if adjudicated else "reviewers"
    if verdict == LabelVerdict.UNSURE and source == Export.Selection.HUMAN_OVER_JUDGE:
        return "unsure"  # any final label overrides the judge in this source, and Unsure approves nothing
    return None


def export_select(*, run: Run, source: str = Export.Selection.JUDGE, judge_config: JudgeConfig | None = None,
                  budget: object = None, include_reviewer_rejected: bool = False,
                  include_verifier_failed: bool = False, exclude_risk=(), labels_ignored: bool = False,
                  stop_at_budget: bool = False, context: SelectContext | None = None) -> Selection:
    """The episodes an export takes, in order, under the reference's rules, less what reviewers rejected or the
    verifier failed unless asked for, and less the episodes holding a risk in `exclude_risk`
    (taskgen/triage/risk.py); and how many approved episodes are left out, by reason. `labels_ignored` selects as if
    no human had labelled anything: a certificate's frame, the judge's own choice, which no label moves.
    `stop_at_budget` stops reading the run once the budget is reached: the same episodes are picked (none after that
    point could be), but `candidates` and `left_out` count only the episodes up to that point (a certificate reads
    neither), and the last chunk is read only as far as the selection expects to need. `context` shares the run's
    reads between the selections of one computation."""
    budget = export_budget_check(settings.EXPORT_BUDGET if budget is None else budget)
    export_source_check(source=source, judge_config=judge_config)
    export_include_check(source=source, include_reviewer_rejected=include_reviewer_rejected)
    try:
        exclude_risk = risk_names_check(exclude_risk)
    except RiskError as exc:
        raise ExportError(str(exc)) from None
    _, order_from = export_order(run, context)
    selection = Selection(run=run, source=source, judge_config=judge_config, budget=budget,
                          include_reviewer_rejected=include_reviewer_rejected,
                          include_verifier_failed=include_verifier_failed, exclude_risk=exclude_risk,
                          order_from=order_from, named=SelectContext.named(context))
    rule = _Rule(source=source, include_reviewer_rejected=include_reviewer_rejected,
                 include_verifier_failed=include_verifier_failed, exclude_risk=exclude_risk,
                 labels_ignored=labels_ignored)
    left_out: dict[str, int] = {}
    steps, walked, pick = 0, 0, selection.picked.append

    def wanted() -> int:
        """The positions still to walk to reach the budget, at the steps a position walked so far, and a quarter
        more (a whole chunk until anything is counted)."""
        return math.ceil((budget - steps) * walked / steps * 1.25) if steps > 0 else LAST_CHUNK

    for chunk in order_chunks(run, judge_config, context, wanted if stop_at_budget else None):
        walked += chunk.positions
        risky = set().union(*(chunk.risks()[name] for name in exclude_risk)) if exclude_risk else set()
        for row, why in zip(chunk.rows, rule.reasons(chunk), strict=True):
            if why == "unapproved":
                continue
            why = why or ("risk" if row.id in risky else None) or _left_out_reason(row=row, steps=steps,
                                                                                   budget=budget)
            if why in _CANDIDATE:
                selection.candidates += 1  # counted before an empty episode is skipped, as the reference does
            if why is not None:
                left_out[why] = left_out.get(why, 0) + 1
                continue
            pick(Candidate(row.id, row.task_id, row.site, row.task_order, row.row_count, row.content_hash))
            steps += row.row_count
            if stop_at_budget and steps >= budget:
                break  # the rest of the chunk could only be left out for the budget
        if stop_at_budget and steps >= budget:
            break  # here, not as the next chunk comes: pulling it from order_chunks reads it (a quarter of a certify)
    selection.left_out = {why: left_out[why] for why in LEFT_OUT_WHY if left_out.get(why)}
    return selection


@dataclass(frozen=True)
class _Rule:
    """What the source approves and what keeps an approved episode out, for one episode at a time."""

    source: str
    include_reviewer_rejected: bool
    include_verifier_failed: bool
    exclude_risk: tuple[str, ...]
    labels_ignored: bool

    def reasons(self, chunk: Chunk) -> list[str | None]:
        """`reason` for each of the chunk's rows, worked out once a chunk for the rule less its risks: a
        certificate's cuts select the same chunks seven times over with the same rule, each cutting other risks.
        Most rows are plain (a judged success, no final label the rule reads, no failed verifier): their reason is
        the same for all of them (`plain`), so `reason` is asked only for the others."""
        key = (self.source, self.include_reviewer_rejected, self.include_verifier_failed, self.labels_ignored)
        if key not in chunk.reasons:
            finals = () if self.labels_ignored else chunk.finals
            judge_yes, failed, plain = chunk.judge_yes, chunk.failed, self.plain_reason()
            chunk.reasons[key] = [self.reason(row, chunk) if row.id in finals or row.id in failed
                                  or row.id not in judge_yes else plain for row in chunk.rows]
        return chunk.reasons[key]

    def plain_reason(self) -> str | None:
        """`reason` of a judged success with no final label and no failed verifier: approved by every source but the
        humans' alone, and nothing keeps it out."""
        return "unapproved" if self.source == Export.Selection.HUMAN else None

    def reason(self, row: ChunkRow, chunk: Chunk) -> str | None:
        """"unapproved" when the source does not approve the episode; else why a label or the verifier keeps it
        out (a LEFT_OUT_WHY key), or None. A risk's cut comes after these (`export_select`)."""
        pk = row.id
        verdict, adjudicated = (None, False) if self.labels_ignored else chunk.finals.get(pk, (None, False))
        human_yes, judge_yes = verdict == LabelVerdict.SUCCESS, pk in chunk.judge_yes
        approved = human_yes if self.source == Export.Selection.HUMAN else judge_yes \
            if self.source == Export.Selection.JUDGE else human_yes or judge_yes
        if not approved:
            return "unapproved"
        return ((verdict is not None and _label_reason(verdict, adjudicated, source=self.source,
                                                       include_reviewer_rejected=self.include_reviewer_rejected))
                or ("verifier" if pk in chunk.failed and not self.include_verifier_failed else None))


_CANDIDATE = frozenset({None, "empty", "budget"})  # what the reference counts as a candidate


def _left_out_reason(*, row: ChunkRow, steps: int, budget: int) -> str | None:
    """Why this approved episode, which nothing else keeps out, is not exported (None: it is)."""
    if not row.has_rows:
        return "no_rows"
    if row.row_count == 0:
        return "empty"
    return "budget" if steps >= budget else None


def export_report(*, selection: Selection) -> dict:
    """_report.json's content, keys in the reference's order; `run` is the imported run dir's path as given."""
    run_name = str(Path(selection.run.source_dir)) if selection.run.source_dir else selection.run.name
    steps = selection.rows
    return {"run": run_name, "candidates": selection.candidates, "selected_trajectories": len(selection.picked),
            "selected_rows": steps, "budget": selection.budget, "short_by": max(0, selection.budget - steps),
            "sites": report_sites([c.task_id for c in selection.picked])}


def export_manifest(*, selection: Selection) -> dict:
    """The exact episode list with what identifies each one's content, and the parameters that chose it."""
    if not selection.named:  # a certificate's own selection: its candidates carry no task ids or sites
        raise ExportError("this selection was made for a certificate, without task ids: select again to export it")
    ids = [c.episode_id for c in selection.picked]
    images: dict[int, list[list[str]]] = {}
    shots = (Screenshot.objects.filter(episode_id__in=ids, kind=Screenshot.Kind.ROW)
             .order_by("episode_id", "step", "name").values_list("episode_id", "name", "blob__sha256"))
    for episode_id, name, sha in shots.iterator(chunk_size=2000):
        images.setdefault(episode_id, []).append([name, sha])
    episodes = [{"episode_id": c.episode_id, "task_id": c.task_id, "site": c.site, "rows": c.rows,
                 "content_hash": c.content_hash, "images": images.get(c.episode_id, [])} for c in selection.picked]
    return {"format": MANIFEST_FORMAT, "params": selection.params(), "report": export_report(selection=selection),
            "left_out": selection.left_out, "episodes": episodes}


def manifest_chunks(manifest: dict) -> Iterator[bytes]:
    """The manifest as written to _manifest.json and hashed (sorted keys, so equal manifests hash equal), a piece at a
    time: the encoder's half a million small strings for a full-size export never sit in memory together."""
    encoder = json.JSONEncoder(indent=1, sort_keys=True, ensure_ascii=False)  # the bytes json.dumps gives
    pending: list[str] = []
    for piece in encoder.iterencode(manifest):
        pending.append(piece)
        if len(pending) >= 8192:
            yield "".join(pending).encode("utf-8")
            pending.clear()
    yield "".join(pending).encode("utf-8")


def manifest_bytes(manifest: dict) -> bytes:
    return b"".join(manifest_chunks(manifest))


def manifest_sha256(manifest: dict) -> str:
    digest = hashlib.sha256()
    for chunk in manifest_chunks(manifest):
        digest.update(chunk)
    return digest.hexdigest()


def manifest_write(manifest: dict, path: Path) -> str:
    """Write _manifest.json piece by piece; its sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as handle:
        for chunk in manifest_chunks(manifest):
            digest.update(chunk)
            handle.write(chunk)
    return digest.hexdigest()


CERTIFICATE_FILE = "_certificate.json"  # beside _report.json, whose keys stay the reference's


def certificate_bytes(manifest: dict) -> bytes | None:
    """_certificate.json: the manifest's certificate (None when the export was not gated)."""
    if "certificate" not in manifest:
        return None
    return json.dumps(manifest["certificate"], indent=1, sort_keys=True).encode("utf-8")


REPORT_KEYS = ("run", "candidates", "selected_trajectories", "selected_rows", "budget", "short_by", "sites")


def report_ordered(report: dict) -> dict:
    """A report's keys put back in the reference's order: PostgreSQL's jsonb, where Export.report is kept, does not
    keep key order."""
    return {key: report[key] for key in REPORT_KEYS if key in report}


def report_bytes(report: dict) -> bytes:
    """_report.json byte for byte as the reference writes it."""
    return json.dumps(report_ordered(report), indent=1).encode("utf-8")
