"""Sites served elsewhere (a MiniWeb server, say): their sitemaps read from JSON files in the reference's format and
kept on Site rows with the base URL their pages are fetched from."""
from __future__ import annotations

import json
from pathlib import Path

from taskgen.models import Site
from taskgen.stages.propose.context import ContextError, sitemap_of


def external_site_register(*, slug: str, sitemap_file: Path, base_url: str) -> Site:
    """Create or update the site from its sitemap file; ContextError names the site and file when it is not a
    JSON sitemap with pages (the site's row is then left as it was)."""
    if not base_url.startswith(("http://", "https://")):
        raise ContextError(f"site {slug}: base URL {base_url!r} is not http(s)")
    try:
        sitemap = json.loads(sitemap_file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ContextError(f"site {slug}: cannot read {sitemap_file} ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ContextError(f"site {slug}: {sitemap_file} is not JSON ({exc})") from exc
    sitemap_of(Site(slug=slug, sitemap=sitemap))  # raises when it lacks pages
    pages = [p for p in sitemap["pages"] if isinstance(p, dict) and p.get("path")]
    site, _ = Site.objects.update_or_create(slug=slug, defaults={
        "name": str(sitemap.get("name") or slug)[:200], "home_path": pages[0]["path"][:500],
        "base_url": base_url[:500], "sitemap": sitemap})
    return site
