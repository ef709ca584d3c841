"""Fixtures of the propose tests: the sandbox sites' sitemaps, crawled once per test session, on Site rows."""
from __future__ import annotations

import json

import pytest

from sandbox.seed import SITES
from sandbox.sitemap import sitemap_build
from taskgen.models import Site


@pytest.fixture(scope="session")
def sandbox_maps(django_db_setup, django_db_blocker) -> dict[str, dict]:
    """The three sandbox sitemaps (the crawl makes and deletes a sandbox session; nothing else stays)."""
    with django_db_blocker.unblock():
        return {slug: sitemap_build(slug=slug) for slug in SITES}


@pytest.fixture
def sandbox_sites(db, sandbox_maps) -> dict[str, Site]:
    return {slug: Site.objects.update_or_create(slug=slug, defaults={
        "name": SITES[slug], "home_path": f"/sites/{slug}/", "sitemap": json.loads(json.dumps(sitemap))})[0]
        for slug, sitemap in sandbox_maps.items()}
