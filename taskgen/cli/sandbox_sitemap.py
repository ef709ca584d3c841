"""`taskgen sandbox-sitemap [--out DIR]`: crawl the sandbox sites, store each sitemap on its Site row."""
from __future__ import annotations

import argparse
from pathlib import Path

from sandbox.sitemap import sitemaps_sync

NAME = "sandbox-sitemap"
HELP = "Generate the sandbox sites' sitemaps from the sites themselves; store them on the Site rows (and as JSON)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, help="also write DIR/<site>.json")


def run(options: dict, stdout, stderr) -> int:
    maps = sitemaps_sync(out_dir=options["out"])
    for slug, sitemap in maps.items():
        stdout.write(f"{slug}: {len(sitemap['pages'])} pages, {len(sitemap['controls'])} controls")
    return 0
