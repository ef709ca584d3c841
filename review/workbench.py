"""What the episode page shows, built from the Episode's own fields: steps with their actions, the request log with
noise marked, data changes as per-field diffs, and links from a judge's evidence to the requests and changes it names.

All values stay plain Python data; templates escape them. Nothing here marks text safe.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from review.page_text import text_clip
from review.selectors import episode_screens
from taskgen.citations import EvidenceIndex, citations_in, evidence_text
from taskgen.models import Episode, Judgment, Label, LabelChange
from taskgen.request_noise import is_request_noise

HIDDEN_BODY_KEYS = {"csrf_token", "csrfmiddlewaretoken"}


def episode_for_workbench(pk: int, *, evidence: bool = True) -> Episode:
    """The episode with everything its page shows, in a fixed number of queries; `evidence=False` leaves out the
    screenshots and the large evidence fields (the label panel alone does not show them)."""
    screenshots = episode_screens()
    judgments = Judgment.objects.select_related("config").order_by("config__provider", "config__model", "id")
    labels = Label.objects.select_related("reviewer").order_by("created_at", "id")
    changes = LabelChange.objects.select_related("changed_by", "label__reviewer").order_by("-changed_at", "-id")
    queryset = Episode.objects.select_related("run", "task", "site", "verifier_result", "final_label__decided_by")
    queryset = queryset.defer("episode_json")  # rows.jsonl names the element each step's action named
    queryset = queryset.prefetch_related(
        Prefetch("judgments", queryset=judgments, to_attr="judgment_list"),
        Prefetch("labels", queryset=labels, to_attr="label_list"),
    )
    if evidence:
        queryset = queryset.prefetch_related(Prefetch("screenshots", queryset=screenshots, to_attr="screen_list"))
    else:
        queryset = queryset.defer("request_log", "data_changes", "screen_text", "actions", "rows_jsonl")
    episode = get_object_or_404(queryset, pk=pk)
    episode.label_history = list(changes.filter(label__episode=episode)[:200])
    return episode


@dataclass
class Request:
    index: int
    method: str
    path: str
    params: str
    body: str
    status: str
    is_noise: bool
    is_write: bool
    cited: bool = False


def requests(episode: Episode) -> list[Request]:
    out = []
    for n, entry in enumerate(episode.request_log or []):
        entry = entry if isinstance(entry, dict) else {"path": evidence_text(entry)}
        path = str(entry.get("path") or "")
        body = entry.get("body")
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k not in HIDDEN_BODY_KEYS}
        method = str(entry.get("method") or "").upper()
        out.append(Request(n, text_clip(method), text_clip(path), text_clip(evidence_text(entry.get("query"))),
                           text_clip(evidence_text(body)), text_clip(evidence_text(entry.get("status"))),
                           is_request_noise(path),
                           method not in ("GET", "HEAD", "OPTIONS", "")))
    return out


@dataclass
class FieldDiff:
    name: str
    before: str
    after: str


@dataclass
class Change:
    index: int
    op: str
    collection: str
    item: str
    fields: list[FieldDiff] = field(default_factory=list)
    cited: bool = False


def _diff_fields(before: dict, after: dict, changed) -> list[FieldDiff]:
    names = list(dict.fromkeys([*before, *after]))
    diffs = [FieldDiff(text_clip(k), text_clip(evidence_text(before.get(k))), text_clip(evidence_text(after.get(k))))
             for k in names if before.get(k) != after.get(k)]
    if not diffs and isinstance(changed, dict):  # only `changed` was recorded: {field: new} or {field: [old, new]}
        for k, v in changed.items():
            old, new = (v[0], v[1]) if isinstance(v, list | tuple) and len(v) == 2 else (None, v)
            diffs.append(FieldDiff(text_clip(str(k)), text_clip(evidence_text(old)), text_clip(evidence_text(new))))
    return diffs


def changes(episode: Episode) -> list[Change]:
    out = []
    for n, c in enumerate(episode.data_changes or []):
        c = c if isinstance(c, dict) else {}
        before = c.get("before") if isinstance(c.get("before"), dict) else {}
        after = c.get("after") if isinstance(c.get("after"), dict) else {}
        op = c.get("op") or ("create" if not before else "delete" if not after else "update")
        item = after or before
        name = item.get("title") or item.get("name") or item.get("subject") or item.get("id") or ""
        what = c.get("collection") or c.get("table") or c.get("kind") or "?"
        out.append(Change(n, text_clip(str(op)), text_clip(str(what)), text_clip(evidence_text(name)),
                          _diff_fields(before, after, c.get("changed"))))
    return out


def judgments_with_citations(episode: Episode, reqs: list[Request], chgs: list[Change],
                             step_files: dict[str, int] | None = None, *, cite: bool = True) -> list[dict]:
    """Each judgment with its parts, every part carrying its citations (taskgen/citations.py): links to the
    evidence they name, or marked unsupported when they point at nothing. Cited rows are highlighted.
    `cite=False` (the label panel alone, without the evidence loaded) leaves citations out."""
    index = EvidenceIndex.for_episode(episode, step_files=step_files) if cite else None
    out = []
    for j in episode.judgment_list:
        parts = []
        for n, p in enumerate(j.parts if isinstance(j.parts, list) else []):
            if not isinstance(p, dict):
                continue
            evidence, done = str(p.get("evidence") or ""), p.get("done") is True
            parts.append({"index": n, "part": text_clip(str(p.get("part") or "")), "done": done,
                          "evidence": text_clip(evidence),
                          "cites": citations_in(evidence, index, done=done) if index else []})
        out.append({"judgment": j, "parts": parts,
                    "unsupported": sum(c.unsupported for part in parts for c in part["cites"])})
    _mark_cited(out, reqs, chgs)
    return out


def _mark_cited(judged: list[dict], reqs: list[Request], chgs: list[Change]) -> None:
    anchors = {c.anchor for j in judged for p in j["parts"] for c in p["cites"] if c.anchor}
    paths = {r.path for r in reqs if f"req-{r.index}" in anchors}
    for r in reqs:
        r.cited = f"req-{r.index}" in anchors or r.path in paths  # every row with a cited path is highlighted
    for c in chgs:
        c.cited = f"chg-{c.index}" in anchors
