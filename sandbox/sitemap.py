"""Sitemaps generated from the sandbox sites themselves: crawl each site's links (GET only, in a throwaway
session) and read every page's title and form controls, in the shape the reference proposer reads:
{name, pages: [{path, title}], controls: [{kind, label, name, page, options: [{text, value}]}]}.
"""
from __future__ import annotations

import json
from collections import Counter, deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

from django.urls import Resolver404, resolve

from sandbox.evidence import COOKIE
from sandbox.models import SandboxSession
from sandbox.seed import SITES

MAX_PAGES = 80
PER_PATTERN = 6  # example pages per URL pattern: enough to show it, not every product


class _PageParser(HTMLParser):
    """Title, links, and form controls (with their labels and options) of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title, self.links, self.controls, self.labels = "", [], [], {}
        self._in, self._label_for, self._select, self._option = None, None, None, None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        elif tag in ("title", "button"):
            self._in = tag
            if tag == "button":
                self.controls.append({"kind": "button", "name": a.get("name", ""), "text": "", "id": a.get("id", "")})
        elif tag == "label":
            self._label_for, self._in = a.get("for", ""), "label"
        elif tag in ("input", "textarea", "select") and a.get("type") not in ("hidden", "submit"):
            kind = a.get("type") or "text" if tag == "input" else tag
            self.controls.append({"kind": kind, "name": a.get("name", ""), "id": a.get("id", ""),
                                  "label": a.get("aria-label", ""), "options": []})
            self._select = self.controls[-1] if tag == "select" else None
        elif tag == "option" and self._select is not None:
            self._option = {"text": "", "value": a.get("value", "")}
            self._select["options"].append(self._option)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("title", "button", "label"):
            self._in = None
        elif tag == "option":
            self._option = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._option is not None:
            self._option["text"] += data.strip()
        elif self._in == "title":
            self.title += data.strip()
        elif self._in == "button":
            self.controls[-1]["text"] += data.strip()
        elif self._in == "label" and self._label_for:
            self.labels[self._label_for] = self.labels.get(self._label_for, "") + data.strip()


def _controls(parser: _PageParser, page: str) -> list[dict]:
    out = []
    for c in parser.controls:
        label = c.pop("text", "") if c["kind"] == "button" else parser.labels.get(c["id"], "") or c.get("label", "")
        out.append({"kind": c["kind"], "label": label, "name": c["name"], "page": page,
                    "options": c.get("options", [])})
    return out


def _pattern(path: str) -> str:
    try:
        return resolve(urlsplit(path).path).url_name or path
    except Resolver404:
        return ""


def sitemap_build(*, slug: str) -> dict:
    """Crawl one sandbox site from its home page (GET only) and describe its pages and controls."""
    from django.test import Client  # here, not at the top: the attempt stage imports this module, and django.test
    # (unittest, xml.dom, the test runner) would be 36-190 ms of every such process's start, for a crawl few run

    session = SandboxSession.objects.create(label=f"sitemap of {slug}")
    client = Client(HTTP_HOST="127.0.0.1")
    client.cookies[COOKIE] = session.token
    home = f"/sites/{slug}/"
    queue, seen, per_pattern = deque([home]), {home}, Counter()
    pages, controls, known = [], [], set()
    while queue and len(pages) < MAX_PAGES:
        path = queue.popleft()
        response = client.get(path)
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        parser = _PageParser()
        parser.feed(response.content.decode("utf-8"))
        pages.append({"path": path, "title": parser.title})
        for c in _controls(parser, path):
            key = (_pattern(path), c["kind"], c["name"], c["label"])
            if key not in known:
                known.add(key)
                controls.append(c)
        _enqueue(parser.links, path, home, seen, per_pattern, queue)
    session.delete()  # the crawl only reads; its session holds nothing worth keeping
    return {"name": SITES[slug], "pages": pages, "controls": controls}


def _enqueue(links: list[str], page: str, home: str, seen: set, per_pattern: Counter, queue: deque) -> None:
    for href in links:
        url = urldefrag(urljoin(page, href))[0]
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.netloc or not path.startswith(home) or path in seen:
            continue
        pattern = _pattern(path)
        if not pattern or per_pattern[pattern] >= PER_PATTERN:
            continue
        per_pattern[pattern] += 1
        seen.add(path)
        queue.append(path)


def sitemaps_sync(*, out_dir: Path | None = None) -> dict[str, dict]:
    """Build every sandbox site's sitemap, store it on its Site row, and write <out_dir>/<slug>.json if given."""
    from taskgen.models import Site

    maps = {}
    for slug, name in SITES.items():
        sitemap = sitemap_build(slug=slug)
        Site.objects.update_or_create(slug=slug, defaults={"name": name, "home_path": f"/sites/{slug}/",
                                                           "sitemap": sitemap})
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / f"{slug}.json").write_text(json.dumps(sitemap, ensure_ascii=False, indent=1), encoding="utf-8")
        maps[slug] = sitemap
    return maps
