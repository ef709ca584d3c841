"""`taskgen propose`: propose tasks for sites on the engine, show progress, print each site's counts.

The offline rules proposer works in this process; a model proposer's batches go to the workers of the `judge` queue
unless --workers N asks for N threads here. Resumable: sites already in --out, or with their tasks in the database,
are kept; `taskgen resume RUN` re-runs the batches of a run that did not finish.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait, wait_report, where_words
from taskgen.models import PipelineRun
from taskgen.providers import provider_can, provider_names, provider_offline
from taskgen.stages.propose.context import ContextError
from taskgen.stages.propose.rules import LABEL as RULES_LABEL
from taskgen.stages.propose.sites import external_site_register
from taskgen.stages.propose.work import ProposeParams

NAME = "propose"
HELP = "Propose tasks for each site from its pages, controls and text (they wait for review on the Tasks page)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sites", default="", help="comma-separated site slugs (default: every site with a sitemap)")
    parser.add_argument("--per-site", type=int, default=140, help="tasks per site (default 140)")
    parser.add_argument("--batch", type=int, default=20, help="tasks asked for per proposer call (default 20)")
    offline = provider_offline("propose")
    parser.add_argument("--provider", choices=provider_names("propose"), default=offline,
                        help=f"the proposer: a model provider, or {offline} ({RULES_LABEL}; the default)")
    parser.add_argument("--model", default=None, help="model name (default: the provider's model setting)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the focus draw (and of the rules proposer)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also append each site's tasks to this tasks.jsonl (under the data root); sites already "
                             "in it are skipped")
    parser.add_argument("--sitemaps", type=Path, default=None,
                        help="a folder of <site>.json sitemaps of sites served at --base-url (not the sandbox)")
    parser.add_argument("--base-url", default="", help="where the --sitemaps sites are served, e.g. http://host:5000")
    parser.add_argument("--workers", type=int, default=0, help="work the batches here with N threads")
    parser.add_argument("--stall-seconds", type=float, default=600,
                        help="stop waiting (exit 1, naming the batches not done) when none finished for this long")


def _register_external(options: dict, stderr) -> None:
    if not options["sitemaps"]:
        return
    for slug in [s.strip() for s in options["sites"].split(",") if s.strip()]:
        try:
            external_site_register(slug=slug, sitemap_file=options["sitemaps"] / f"{slug}.json",
                                   base_url=options["base_url"])
        except ContextError as exc:  # this site is reported (and skipped below); the others go on
            stderr.write(f"propose: {exc}")


def _raw(options: dict) -> dict:
    out = options["out"]
    return {"sites": options["sites"], "per_site": options["per_site"], "batch": options["batch"],
            "provider": options["provider"], "model": options["model"], "seed": options["seed"],
            "out": str(out.expanduser().absolute()) if out else ""}


def run(options: dict, stdout, stderr) -> int:
    _register_external(options, stderr)
    try:
        pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params=_raw(options), started_with=_raw(options))
    except StageParamsError as exc:
        stderr.write(f"propose: {exc}")
        return 2
    params = ProposeParams.from_json(pipeline_run.params)
    for _site, why in params.skipped:
        stderr.write(f"skipped {why}")
    if not pipeline_run.total:
        stderr.write("nothing to propose: every site asked for is done already")
        return 0
    here = max(options["workers"], 1 if provider_can(params.provider, "offline") else 0)
    where = where_words(pipeline_run=pipeline_run, work_here=here)
    stderr.write(f"proposing for {len(params.sites)} sites, {params.per_site} each, in batches of {params.batch} "
                 f"with {params.provider} {where} (run {pipeline_run.pk})")
    waited = run_wait(pipeline_run=pipeline_run, stream=stderr, work_here=here, stall_seconds=options["stall_seconds"])
    code = wait_report(waited=waited, stream=stderr)
    waited.pipeline_run.refresh_from_db()
    _print_sites(waited.pipeline_run, stdout)
    return code


def _print_sites(pipeline_run: PipelineRun, stdout) -> None:
    result = pipeline_run.result or {}
    for site in result.get("sites", []):
        stdout.write(f"  {site['site']}: {site['kept']} tasks ({site['info']} info), {site['duplicates']} duplicates "
                     f"dropped, {site['invalid']} invalid, {site['unreadable_answers']} unreadable answers")
    if result.get("written") is not None:
        stdout.write(f"wrote {result['written']} tasks to {pipeline_run.params.get('out')}")
    stdout.write(json.dumps({k: v for k, v in result.items() if k != "sites"}, ensure_ascii=False))
