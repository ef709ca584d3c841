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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from review.models import FinalLabel, LabelVerdict
from review.risk import RiskError, risk_names_check, risk_sets
from taskgen.models import Episode, Export, JudgeConfig, Judgment, Run, Screenshot, VerifierResult

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


@dataclass
class SelectContext:
    """What the selections of one computation share: a certificate selects the same run for its population, its
    frame and every cut, and each would read every episode of the run again (a second at 100,000 episodes). Made for
    one computation and dropped after it: nothing is kept across requests."""

    reads: dict = field(default_factory=dict)

    def get(self, key: tuple, make):
        if key not in self.reads:
            self.reads[key] = make()
        return self.reads[key]


def _read(context: SelectContext | None, key: tuple, make):
    return make() if context is None else context.get(key, make)


class ExportError(ValueError):
    """Bad export parameters (budget, source, judge config, folder): nothing was written."""


@dataclass(frozen=True)
class Candidate:
    """One approved episode with rows, in export order."""

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
    head = f"{exported + sum(left_out.values())} {CONSIDERED_WORDS[source]}: {exported} exported"
    if not left_out:
        return head + ", none left out."
    return f"{head}; left out: " + ", ".join(f"{n} ({LEFT_OUT_WHY[why]})" for why, n in left_out.items()) + "."


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


def run_risk_sets(*, run: Run, judge_config: JudgeConfig | None, context: SelectContext | None = None) -> dict:
    """The run's episodes holding each risk (review/risk.py, the judge config's verdicts)."""
    config_id = judge_config.pk if judge_config else None
    return _read(context, ("risks", run.pk, config_id),
                 lambda: risk_sets(Episode.objects.filter(run=run), config_id))


def _risky_ids(*, run: Run, judge_config: JudgeConfig | None, exclude_risk: tuple[str, ...],
               context: SelectContext | None = None) -> set[int]:
    """The run's episodes holding any of the risks cut."""
    if not exclude_risk:
        return set()
    sets = run_risk_sets(run=run, judge_config=judge_config, context=context)
    return set().union(*(sets[name] for name in exclude_risk))


def _left_out_by_label(*, run: Run, source: str, judge_config: JudgeConfig | None, include_reviewer_rejected: bool,
                       include_verifier_failed: bool, labels_ignored: bool = False,
                       context: SelectContext | None = None) -> dict[int, str | None]:
    """Each episode the source (or the judge, beside human labels) approves: None when it may be exported, else the
    reason (a LEFT_OUT_WHY key) a label or the verifier keeps it out. `labels_ignored`: as if nobody had labelled."""
    finals = {} if labels_ignored else _read(context, ("finals", run.pk), lambda: {
        pk: (verdict, adjudicated) for pk, verdict, adjudicated in
        FinalLabel.objects.filter(episode__run=run).values_list("episode_id", "verdict", "adjudicated")})
    human_yes = {pk for pk, (verdict, _) in finals.items() if verdict == LabelVerdict.SUCCESS}
    judge_yes: set[int] = set()
    if judge_config is not None and source != Export.Selection.HUMAN:
        judge_yes = _read(context, ("judge_yes", run.pk, judge_config.pk), lambda: set(
            Judgment.objects.filter(episode__run=run, config=judge_config, verdict=Judgment.Verdict.SUCCESS)
            .values_list("episode_id", flat=True)))
    failed = set() if include_verifier_failed else _read(context, ("failed", run.pk), lambda: set(
        VerifierResult.objects.filter(episode__run=run, ok=False).values_list("episode_id", flat=True)))
    considered = human_yes if source == Export.Selection.HUMAN else judge_yes if source == Export.Selection.JUDGE \
        else human_yes | judge_yes
    return {pk: _label_reason(*finals.get(pk, (None, False)), source=source,
                              include_reviewer_rejected=include_reviewer_rejected) or
            ("verifier" if pk in failed else None) for pk in considered}


def _label_reason(verdict: str | None, adjudicated: bool, *, source: str,
                  include_reviewer_rejected: bool) -> str | None:
    """The reason a final label keeps an approved episode out, or None."""
    if verdict == LabelVerdict.NOT_SUCCESS and (adjudicated or not include_reviewer_rejected):
        return "adjudicated" if adjudicated else "reviewers"
    if verdict == LabelVerdict.UNSURE and source == Export.Selection.HUMAN_OVER_JUDGE:
        return "unsure"  # any final label overrides the judge in this source, and Unsure approves nothing
    return None


def tasks_file_slots(run: Run) -> dict[str, int] | None:
    """Each task's place within its site in the run's tasks file (the reference walks the file, so a task without an
    episode still takes its turn); None when the file is gone or unreadable, and episodes alone give the order."""
    path = Path(run.tasks_file) if run.tasks_file else None
    if path is None or not path.is_file():
        return None
    slots: dict[str, int] = {}
    per_site: dict[str, int] = {}
    try:
        for line in path.read_text(encoding="utf-8").split("\n"):
            if line.strip():
                task = json.loads(line)
                slots.setdefault(task["task_id"], per_site.get(task["site"], 0))
                per_site[task["site"]] = per_site.get(task["site"], 0) + 1
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return slots


def _round_robin(episodes: list[dict], slots: dict[str, int] | None) -> list[dict]:
    """Sites sorted by name, each site's tasks in file order, one from each site per round."""
    by_site: dict[str, list[dict]] = {}
    for row in sorted(episodes, key=lambda r: (r["task_order"], r["id"])):
        by_site.setdefault(row["site__slug"], []).append(row)
    ranked = []
    for site in sorted(by_site):
        for index, row in enumerate(by_site[site]):
            ranked.append(((slots[row["task__task_id"]] if slots else index), site, row))
    return [row for *_, row in sorted(ranked, key=lambda item: item[:2])]


def _episodes_in_order(run: Run) -> tuple[list[dict], dict[str, int] | None]:
    """The run's episodes in the reference's order (round robin over sites), and the tasks file's slots if used."""
    rows = list(Episode.objects.filter(run=run).values("id", "task_order", "task__task_id", "site__slug",
                                                       "has_rows", "row_count", "content_hash"))
    slots = tasks_file_slots(run)
    if slots is not None and any(row["task__task_id"] not in slots for row in rows):
        slots = None  # the file no longer lists every episode's task: fall back to the episodes' own order
    return _round_robin(rows, slots), slots


def export_select(*, run: Run, source: str = Export.Selection.JUDGE, judge_config: JudgeConfig | None = None,
                  budget: object = None, include_reviewer_rejected: bool = False,
                  include_verifier_failed: bool = False, exclude_risk=(), labels_ignored: bool = False,
                  context: SelectContext | None = None) -> Selection:
    """The episodes an export takes, in order, under the reference's rules, less what reviewers rejected or the
    verifier failed unless asked for, and less the episodes holding a risk in `exclude_risk` (review/risk.py); and
    how many approved episodes are left out, by reason. `labels_ignored` selects as if no human had labelled
    anything: a certificate's frame, the judge's own choice, which no label moves. `context` shares the run's reads
    between the selections of one computation."""
    budget = export_budget_check(settings.EXPORT_BUDGET if budget is None else budget)
    export_source_check(source=source, judge_config=judge_config)
    export_include_check(source=source, include_reviewer_rejected=include_reviewer_rejected)
    try:
        exclude_risk = risk_names_check(exclude_risk)
    except RiskError as exc:
        raise ExportError(str(exc)) from None
    outcome = _left_out_by_label(run=run, source=source, judge_config=judge_config,
                                 include_reviewer_rejected=include_reviewer_rejected,
                                 include_verifier_failed=include_verifier_failed, labels_ignored=labels_ignored,
                                 context=context)
    for pk in _risky_ids(run=run, judge_config=judge_config, exclude_risk=exclude_risk,
                         context=context) & outcome.keys():
        outcome[pk] = outcome[pk] or "risk"
    ordered, slots = _read(context, ("ordered", run.pk), lambda: _episodes_in_order(run))
    selection = Selection(run=run, source=source, judge_config=judge_config, budget=budget,
                          include_reviewer_rejected=include_reviewer_rejected,
                          include_verifier_failed=include_verifier_failed, exclude_risk=exclude_risk,
                          order_from="tasks file" if slots is not None else "episodes")
    left_out: dict[str, int] = {}
    steps = 0
    for row in ordered:
        why = _left_out_reason(row=row, outcome=outcome, steps=steps, budget=budget)
        if why == "unapproved":
            continue
        if why in (None, "empty", "budget"):
            selection.candidates += 1  # counted before an empty episode is skipped, as the reference does
        if why is not None:
            left_out[why] = left_out.get(why, 0) + 1
            continue
        selection.picked.append(Candidate(row["id"], row["task__task_id"], row["site__slug"], row["task_order"],
                                          row["row_count"], row["content_hash"]))
        steps += row["row_count"]
    selection.left_out = {why: left_out[why] for why in LEFT_OUT_WHY if left_out.get(why)}
    return selection


def _left_out_reason(*, row: dict, outcome: dict[int, str | None], steps: int, budget: int) -> str | None:
    """Why this episode is not exported (None: it is); "unapproved" for what the source does not approve."""
    if row["id"] not in outcome:
        return "unapproved"
    if outcome[row["id"]] is not None:
        return outcome[row["id"]]
    if not row["has_rows"]:
        return "no_rows"
    if row["row_count"] == 0:
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


def report_bytes(report: dict) -> bytes:
    """_report.json byte for byte as the reference writes it (keys put back in its order: PostgreSQL's jsonb, where
    Export.report is kept, does not keep key order)."""
    ordered = {key: report[key] for key in REPORT_KEYS if key in report}
    return json.dumps(ordered, indent=1).encode("utf-8")
