"""What the episode page shows, built from the Episode's own fields: steps with their actions, the request log with
noise marked, data changes as per-field diffs, and links from a judge's evidence to the requests and changes it names.

All values stay plain Python data; templates escape them. Nothing here marks text safe.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from review.models import Label, LabelChange
from review.selectors import episode_screens
from taskgen.models import Episode, Judgment

# The paths the reference judge leaves out of its evidence: static files, the admin, favicons.
NOISE_PATH = re.compile(r"^/(_admin|admin|static|favicon)|\.(css|js|png|jpg|jpeg|gif|svg|ico|woff2?|map)$", re.I)
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
        queryset = queryset.prefetch_related(Prefetch("screenshots", queryset=screenshots, to_attr="screens"))
    else:
        queryset = queryset.defer("request_log", "data_changes", "screen_text", "actions", "rows_jsonl")
    episode = get_object_or_404(queryset, pk=pk)
    episode.label_history = list(changes.filter(label__episode=episode)[:200])
    return episode


def _text(value) -> str:
    if value in (None, "", {}, []):
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


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
        entry = entry if isinstance(entry, dict) else {"path": _text(entry)}
        path = str(entry.get("path") or "")
        body = entry.get("body")
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k not in HIDDEN_BODY_KEYS}
        method = str(entry.get("method") or "").upper()
        out.append(Request(n, method, path, _text(entry.get("query")), _text(body), _text(entry.get("status")),
                           bool(NOISE_PATH.search(path)), method not in ("GET", "HEAD", "OPTIONS", "")))
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
    diffs = [FieldDiff(k, _text(before.get(k)), _text(after.get(k))) for k in names if before.get(k) != after.get(k)]
    if not diffs and isinstance(changed, dict):  # only `changed` was recorded: {field: new} or {field: [old, new]}
        for k, v in changed.items():
            old, new = (v[0], v[1]) if isinstance(v, list | tuple) and len(v) == 2 else (None, v)
            diffs.append(FieldDiff(str(k), _text(old), _text(new)))
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
        out.append(Change(n, str(op), str(what), _text(name), _diff_fields(before, after, c.get("changed"))))
    return out


# A path named in evidence ends at whitespace, punctuation or a query string: /cart must not match /cart/add.
_PATH_END = r"(?=$|[\s;,.:)\]'\"?`>])"


@dataclass
class Citation:
    anchor: str
    label: str


def _cites(evidence: str, reqs: list[Request], chgs: list[Change]) -> list[Citation]:
    """The requests and changes an evidence text names: a request path, or a collection name as a word."""
    found: list[Citation] = []
    low = evidence.lower()
    linked: set[str] = set()
    for r in reqs:
        path = r.path.lower()
        if r.is_noise or len(path) < 2 or not re.search(re.escape(path) + _PATH_END, low):
            continue
        r.cited = True  # every row with the path is highlighted; the link goes to the first of them
        if (r.method, path) not in linked:
            linked.add((r.method, path))
            found.append(Citation(f"req-{r.index}", f"{r.method} {r.path}"))
    for c in chgs:
        if c.collection != "?" and re.search(rf"\b{re.escape(c.collection.lower())}\b", low):
            c.cited = True
            found.append(Citation(f"chg-{c.index}", f"{c.op} {c.collection}"))
    return found[:12]


def judgments_with_citations(episode: Episode, reqs: list[Request], chgs: list[Change]) -> list[dict]:
    """Each judgment with its parts, every part carrying links to the evidence rows it names."""
    out = []
    for j in episode.judgment_list:
        parts = [{"index": n, "part": str(p.get("part") or ""), "done": p.get("done") is True,
                  "evidence": str(p.get("evidence") or ""), "cites": _cites(str(p.get("evidence") or ""), reqs, chgs)}
                 for n, p in enumerate(j.parts if isinstance(j.parts, list) else []) if isinstance(p, dict)]
        out.append({"judgment": j, "parts": parts})
    return out
