"""What a proposer sees of a site: its name and home, every page (path, title), the controls per page (kind, label, a
few option texts), and the visible text of the home page and the pages richest in controls, each capped.

Pages come from the site's sitemap (the reference's format: {name, pages: [{path, title}], controls: [{kind, label,
name, page, options}]}). A sandbox site's pages are rendered in this process; any other site's pages are fetched
over HTTP from its base URL.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from taskgen.models import Site
from taskgen.stages.propose.keep import known_text

TEXT_PAGES = 6  # the home page and the five pages with the most controls
TEXT_CAP = 1800  # characters of visible text per page
LISTED_PAGES, LISTED_CONTROL_PAGES, CONTROLS_PER_PAGE, OPTIONS_SHOWN = 90, 40, 8, 4
SKIPPED_CONTROL_KINDS = ("qa", "carry")  # the harness's own controls, not the site's
FETCH_TIMEOUT_SECONDS = 10


class ContextError(ValueError):
    """A site whose context cannot be built (no sitemap, no pages, a base URL that does not answer)."""


@dataclass
class SiteContext:
    """The context of one site as a proposer is shown it; `text` is what goes into the prompt."""

    site: str
    name: str
    home: str
    paths: list[str]
    text: str
    problems: list[str] = field(default_factory=list)
    known: str = ""  # every title, label and option and the page texts, normalised: what grounding checks against


class _VisibleText(HTMLParser):
    """The text a visitor sees: scripts, styles and drawings left out, one line per block of text."""

    HIDDEN = {"script", "style", "noscript", "svg", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.HIDDEN:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        line = " ".join(data.split())
        if line and not self._hidden and (not self.lines or self.lines[-1] != line):
            self.lines.append(line)


def visible_text(page_html: str, cap: int = TEXT_CAP) -> str:
    """A page's visible text, whitespace collapsed, repeated lines once, at most `cap` characters."""
    parser = _VisibleText()
    parser.feed(page_html)
    parser.close()
    kept, used = [], 0
    for line in parser.lines:
        kept.append(line)
        used += len(line) + 1
        if used > cap:
            break
    return "\n".join(kept)[:cap]


def sitemap_of(site: Site) -> dict:
    """The site's sitemap, checked: a JSON object with a list of pages that have paths."""
    sitemap = site.sitemap
    if isinstance(sitemap, str):
        try:
            sitemap = json.loads(sitemap)
        except ValueError as exc:
            raise ContextError(f"site {site.slug}: its sitemap is not JSON ({exc})") from exc
    if not isinstance(sitemap, dict) or not isinstance(sitemap.get("pages"), list):
        raise ContextError(f"site {site.slug}: its sitemap has no list of pages (run `taskgen sandbox-sitemap`, "
                           "or give a sitemap JSON with --sitemap)")
    if not [p for p in sitemap["pages"] if isinstance(p, dict) and p.get("path")]:
        raise ContextError(f"site {site.slug}: its sitemap lists no page with a path")
    return sitemap


def _control_line(control: dict) -> str:
    label = str(control.get("label") or control.get("name") or "")[:40]
    options = [str(o.get("text") or o.get("value") or "")[:40] for o in (control.get("options") or [])[:OPTIONS_SHOWN]
               if isinstance(o, dict)]
    shown = ", ".join(o for o in options if o)
    return f"{control.get('kind')} '{label}'" + (f" [{shown}]" if shown else "")


def controls_by_page(sitemap: dict) -> dict[str, list[str]]:
    """Each page's controls as short lines, in sitemap order; the harness's own controls left out."""
    controls = sitemap.get("controls") or []
    if isinstance(controls, dict):
        controls = list(controls.values())
    by_page: dict[str, list[str]] = {}
    for control in controls:
        if isinstance(control, dict) and control.get("kind") not in SKIPPED_CONTROL_KINDS and control.get("page"):
            by_page.setdefault(control["page"], []).append(_control_line(control))
    return by_page


def pages_to_read(home: str, by_page: dict[str, list[str]]) -> list[str]:
    """The home page, then the pages with the most controls (ties in sitemap order)."""
    richest = sorted(by_page, key=lambda page: -len(by_page[page]))
    return [home] + [page for page in richest if page != home][:TEXT_PAGES - 1]


PageReader = Callable[[str], str]


def sandbox_reader() -> tuple[PageReader, Callable[[], None]]:
    """Read sandbox pages in this process (sandbox/pages.py), in a throwaway session (reading changes nothing); and
    its cleanup."""
    from sandbox.models import SandboxSession
    from sandbox.pages import PageUnreadable, page_read

    session = SandboxSession.objects.create(label="propose: site context")

    def read(path: str) -> str:
        try:
            return page_read(path, token=session.token)
        except PageUnreadable as exc:
            raise ContextError(str(exc)) from None

    return read, session.delete


def http_reader(base_url: str) -> PageReader:
    """Fetch pages from a site served elsewhere (a MiniWeb server, say)."""
    def read(path: str) -> str:
        url = base_url.rstrip("/") + "/" + path.lstrip("/")
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_SECONDS) as response:  # noqa: S310 (http(s) only)
            return response.read().decode(response.headers.get_content_charset() or "utf-8", errors="replace")

    return read


def _reader_for(site: Site) -> tuple[PageReader, Callable[[], None]]:
    if site.base_url:
        if not site.base_url.startswith(("http://", "https://")):
            raise ContextError(f"site {site.slug}: base URL {site.base_url!r} is not http(s)")
        return http_reader(site.base_url), lambda: None
    from sandbox.seed import SITES

    if site.slug not in SITES:
        raise ContextError(f"site {site.slug}: not a sandbox site and no base URL to fetch its pages from")
    return sandbox_reader()


def _page_texts(site: Site, home: str, show: list[str], read: PageReader) -> tuple[list[str], list[str]]:
    texts, problems = [], []
    for path in show:
        try:
            texts.append(f"--- {path}\n{visible_text(read(path))}")
        except (OSError, ValueError, urllib.error.URLError) as exc:  # the one page is left out, the site goes on
            if path == home and site.base_url:
                raise ContextError(f"site {site.slug}: {site.base_url} does not answer for {path} "
                                   f"({type(exc).__name__}: {exc})") from exc
            problems.append(f"site {site.slug}, page {path}: could not render ({type(exc).__name__}: {exc})")
            texts.append(f"--- {path}\n(could not render: {type(exc).__name__})")
    return texts, problems


def _known_text(sitemap: dict, texts: list[str]) -> str:
    pieces = [str(p.get("title") or "") for p in sitemap["pages"] if isinstance(p, dict)]
    for control in sitemap.get("controls") or []:
        if isinstance(control, dict):
            pieces += [str(control.get("label") or "")]
            pieces += [str(o.get("text") or "") for o in control.get("options") or [] if isinstance(o, dict)]
    return known_text(pieces + texts)


def site_context_build(*, site: Site, read: PageReader | None = None) -> SiteContext:
    """The context of `site` (ContextError when its sitemap or its home page cannot be read)."""
    sitemap = sitemap_of(site)
    pages = [p for p in sitemap["pages"] if isinstance(p, dict) and p.get("path")]
    home = pages[0]["path"]
    by_page = controls_by_page(sitemap)
    cleanup = lambda: None  # noqa: E731
    if read is None:
        read, cleanup = _reader_for(site)
    try:
        texts, problems = _page_texts(site, home, pages_to_read(home, by_page), read)
    finally:
        cleanup()
    page_lines = [f"{p['path']}  {p.get('title') or ''}" for p in pages[:LISTED_PAGES]]
    control_lines = [f"{page}: " + "; ".join(lines[:CONTROLS_PER_PAGE])
                     for page, lines in list(by_page.items())[:LISTED_CONTROL_PAGES]]
    text = ("PAGES\n" + "\n".join(page_lines) + "\n\nCONTROLS BY PAGE\n" + "\n".join(control_lines)
            + "\n\nPAGE TEXT\n" + "\n\n".join(texts))
    return SiteContext(site=site.slug, name=str(sitemap.get("name") or site.name or site.slug), home=home,
                       paths=[p["path"] for p in pages], text=text, problems=problems,
                       known=_known_text(sitemap, texts))
