"""Selecting an export: which approved episodes become training rows, in which order, up to a step budget.

The rules are the reference's `rows` stage: sites interleaved round robin (sites sorted by name, each site's tasks in
file order), whole episodes, a candidate counted before an empty episode is skipped, and episodes skipped once the
rows so far reach the budget (so the last episode taken may pass it). What counts as approved depends on the source:
judge successes (the reference), final human labels, or human labels over judge verdicts. An episode without rows,
or with an adjudicated NOT SUCCESS, is never exported.

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
from taskgen.models import Episode, Export, JudgeConfig, Judgment, Run, Screenshot

MANIFEST_FORMAT = "taskgen-rows-manifest/1"
SOURCES = [choice.value for choice in Export.Selection]


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
    order_from: str = "episodes"
    candidates: int = 0
    picked: list[Candidate] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.picked)

    def params(self) -> dict:
        """The parameters that decide the episode list (no folder, no time: same parameters, same manifest)."""
        return {"run": self.run.name, "run_id": self.run.pk, "source": self.source,
                "judge_config": self.judge_config.key if self.judge_config else None, "budget": self.budget,
                "order_from": self.order_from}


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


def report_sites(task_ids: list[str]) -> int:
    """The reference's `sites` figure, computed from task ids as it does (<prefix>-<site>-<n>); an id without a dash
    (which the reference would crash on) counts as its own site."""
    names = set()
    for task_id in task_ids:
        name = task_id.split("-", 1)[1] if "-" in task_id else task_id
        names.add(name.rsplit("-", 1)[0])
    return len(names)


def _approved_ids(*, run: Run, source: str, judge_config: JudgeConfig | None) -> set[int]:
    finals = dict(FinalLabel.objects.filter(episode__run=run).values_list("episode_id", "verdict"))
    refused = FinalLabel.objects.filter(episode__run=run, adjudicated=True, verdict=LabelVerdict.NOT_SUCCESS)
    adjudicated_no = set(refused.values_list("episode_id", flat=True))
    human_yes = {pk for pk, verdict in finals.items() if verdict == LabelVerdict.SUCCESS}
    judge_yes: set[int] = set()
    if judge_config is not None:
        judge_yes = set(Judgment.objects.filter(episode__run=run, config=judge_config,
                                                verdict=Judgment.Verdict.SUCCESS).values_list("episode_id", flat=True))
    if source == Export.Selection.JUDGE:
        approved = judge_yes
    elif source == Export.Selection.HUMAN:
        approved = human_yes
    else:  # a final human label (any verdict, UNSURE included) overrides the judge; elsewhere the judge decides
        approved = human_yes | {pk for pk in judge_yes if pk not in finals}
    return approved - adjudicated_no


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


def export_select(*, run: Run, source: str = Export.Selection.JUDGE, judge_config: JudgeConfig | None = None,
                  budget: object = None) -> Selection:
    """The episodes an export takes, in order, under the reference's rules."""
    budget = export_budget_check(settings.EXPORT_BUDGET if budget is None else budget)
    export_source_check(source=source, judge_config=judge_config)
    approved = _approved_ids(run=run, source=source, judge_config=judge_config)
    rows = list(Episode.objects.filter(run=run).values("id", "task_order", "task__task_id", "site__slug",
                                                       "has_rows", "row_count", "content_hash"))
    slots = tasks_file_slots(run)
    if slots is not None and any(row["task__task_id"] not in slots for row in rows):
        slots = None  # the file no longer lists every episode's task: fall back to the episodes' own order
    selection = Selection(run=run, source=source, judge_config=judge_config, budget=budget,
                          order_from="tasks file" if slots is not None else "episodes")
    steps = 0
    for row in _round_robin(rows, slots):
        if row["id"] not in approved or not row["has_rows"]:
            continue
        selection.candidates += 1  # counted before an empty episode is skipped, as the reference does
        if row["row_count"] == 0 or steps >= budget:
            continue
        selection.picked.append(Candidate(row["id"], row["task__task_id"], row["site__slug"], row["task_order"],
                                          row["row_count"], row["content_hash"]))
        steps += row["row_count"]
    return selection


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
            "episodes": episodes}


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


REPORT_KEYS = ("run", "candidates", "selected_trajectories", "selected_rows", "budget", "short_by", "sites")


def report_bytes(report: dict) -> bytes:
    """_report.json byte for byte as the reference writes it (keys put back in its order: PostgreSQL's jsonb, where
    Export.report is kept, does not keep key order)."""
    ordered = {key: report[key] for key in REPORT_KEYS if key in report}
    return json.dumps(ordered, indent=1).encode("utf-8")
