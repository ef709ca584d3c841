"""The propose stage as the engine runs it: one unit per (site, batch). A site gets ceil(per_site / batch) batches
and two spare ones (for duplicates and unreadable answers); a batch finding its site full asks nothing."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.conf import settings

from taskgen.engine.contract import RetryLater, StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.engine.units import OPEN
from taskgen.models import PipelineRun, ProposalBatch, Site, Task, WorkUnit
from taskgen.prompt_files import PromptFileError
from taskgen.providers import provider_can, provider_check, provider_default_model, provider_missing, provider_offline
from taskgen.stages.paths import PathError, path_under_data_root
from taskgen.stages.propose.context import ContextError, sitemap_of
from taskgen.stages.propose.prompt import propose_prompt
from taskgen.stages.propose.service import Proposer, propose_batch, run_tasks
from taskgen.stages.propose.tasks_file import sites_in_file, tasks_jsonl_append

SPARE_BATCHES = 2
SPARE_WAIT_SECONDS = 0.5
MAX_PER_SITE, MAX_BATCH = 5000, 100


@dataclass(frozen=True)
class ProposeParams(StageParams):
    """Which sites, how many tasks each in batches of how many, from which proposer; `skipped` names the sites
    asked for that this run leaves out, and why."""

    sites: list = field(default_factory=list)
    per_site: int = 140
    batch: int = 20
    provider: str = field(default_factory=lambda: provider_offline("propose"))
    model: str = ""
    seed: int = 0
    out: str = ""
    prompt_version: str = ""
    skipped: list = field(default_factory=list)

    @property
    def proposer(self) -> Proposer:
        return Proposer(provider=self.provider, model=self.model, seed=self.seed)


def _number(raw: dict, name: str, default: int, top: int) -> int:
    try:
        value = int(raw.get(name) if raw.get(name) not in (None, "") else default)
    except (TypeError, ValueError):
        raise StageParamsError(f"{name} must be a whole number") from None
    if not 1 <= value <= top:
        raise StageParamsError(f"{name} must be between 1 and {top}")
    return value


def _site_names(raw: dict) -> list[str]:
    sites = raw.get("sites") or []
    if isinstance(sites, str):
        sites = sites.split(",")
    names = [str(s).strip() for s in sites if str(s).strip()]
    if not names:  # every site that has a sitemap
        names = list(Site.objects.exclude(sitemap={}).values_list("slug", flat=True))
    return list(dict.fromkeys(names))


def _why_not(slug: str, per_site: int, in_file: set[str]) -> str:
    """'' when the site can be proposed for; else why not (unknown, bad sitemap, done already)."""
    site = Site.objects.filter(slug=slug).first()
    if site is None:
        return f"site {slug}: there is no such site (known sites have a sitemap: taskgen sandbox-sitemap)"
    try:
        sitemap_of(site)
    except ContextError as exc:
        return str(exc)
    if slug in in_file:
        return f"site {slug}: done already (its tasks are in the output file)"
    waiting = Task.objects.filter(site=site, source="proposed").exclude(review_state=Task.ReviewState.DROPPED)
    if waiting.count() >= per_site:
        return f"site {slug}: done already (it has {per_site} or more proposed tasks)"
    return ""


def _proposer_checked(raw: dict) -> tuple[str, str, str]:
    provider = raw.get("provider") or provider_offline("propose")
    try:
        provider_check(provider, "propose")
    except ValueError as exc:
        raise StageParamsError(str(exc)) from exc
    if provider_missing(provider):
        raise StageParamsError(f"{provider_missing(provider)}: use the {provider_offline('propose')} proposer offline")
    try:
        version = propose_prompt().version
    except PromptFileError as exc:
        raise StageParamsError(str(exc)) from exc
    model = "" if provider_can(provider, "offline") else raw.get("model") or provider_default_model(provider)
    return provider, model, version


def propose_params_check(raw: dict) -> ProposeParams:
    """The parameters of a propose run from the form or the command line. Sites that cannot be proposed for are
    named in `skipped` and the others go on; StageParamsError when none is left for a reason other than done."""
    per_site, batch = _number(raw, "per_site", 140, MAX_PER_SITE), _number(raw, "batch", 20, MAX_BATCH)
    provider, model, version = _proposer_checked(raw)
    out = ""
    if raw.get("out"):
        try:
            out = str(path_under_data_root(raw=raw["out"]))
        except PathError as exc:
            raise StageParamsError(str(exc)) from exc
    in_file = sites_in_file(path_under_data_root(raw=out)) if out else set()
    reasons = {slug: _why_not(slug, per_site, in_file) for slug in _site_names(raw)}
    sites = [slug for slug, why in reasons.items() if not why]
    skipped = [[slug, why] for slug, why in reasons.items() if why]
    if not sites and not any("done already" in why for _, why in skipped):
        raise StageParamsError("no site to propose for: " + "; ".join(why for _, why in skipped) if skipped
                               else "no site to propose for: give --sites, or build the sitemaps first")
    return ProposeParams(sites=sites, per_site=per_site, batch=batch, provider=provider, model=model,
                         seed=int(raw.get("seed") or 0), out=out, prompt_version=version, skipped=skipped)


def batches_per_site(params: ProposeParams) -> int:
    return math.ceil(params.per_site / params.batch) + SPARE_BATCHES


def _units(params: ProposeParams) -> list[str]:
    """`site:index`, the first batch of every site before the second of any, so sites progress together."""
    return [f"{site}:{index}" for index in range(batches_per_site(params)) for site in params.sites]


def _regular_batches_open(pipeline_run: PipelineRun, params: ProposeParams, site: str) -> bool:
    keys = [f"{site}:{index}" for index in range(batches_per_site(params) - SPARE_BATCHES)]
    return WorkUnit.objects.filter(pipeline_run=pipeline_run, key__in=keys, status__in=OPEN).exists()


def _do(pipeline_run: PipelineRun, params: ProposeParams, key: str) -> dict:
    site, index = key.rsplit(":", 1)
    spare = int(index) >= batches_per_site(params) - SPARE_BATCHES
    if spare and _regular_batches_open(pipeline_run, params, site):
        # a spare batch is for what the site's batches did not keep: it waits until they have all answered
        raise RetryLater(SPARE_WAIT_SECONDS, "a spare batch waits for the site's other batches")
    return propose_batch(pipeline_run_id=pipeline_run.pk, site_slug=site, index=int(index),
                         per_site=params.per_site, batch=params.batch, proposer=params.proposer)


def site_summary(pipeline_run: PipelineRun, site: Site) -> dict:
    """What a run did for one site: tasks kept (how many information tasks), duplicates, invalid, batches."""
    batches = ProposalBatch.objects.filter(pipeline_run=pipeline_run, site=site)
    tasks = run_tasks(pipeline_run=pipeline_run, site=site)
    problems = next((b.context_problems for b in batches if b.context_problems), [])
    return {"site": site.slug, "kept": tasks.count(), "info": tasks.filter(task_kind=Task.Kind.INFO).count(),
            "duplicates": sum(b.duplicates for b in batches), "invalid": sum(b.invalid for b in batches),
            "batches": batches.count(), "unreadable_answers": batches.exclude(answer_error="").count(),
            "pages_not_read": problems}


def _finish(pipeline_run: PipelineRun, params: ProposeParams, failed: int) -> dict:
    sites = [Site.objects.get(slug=slug) for slug in params.sites]
    summary = {"proposer": params.provider, "model": params.proposer.model_shown, "per_site": params.per_site,
               "sites": [site_summary(pipeline_run, site) for site in sites], "skipped": params.skipped,
               "failed_batches": failed}
    summary["tasks_kept"] = sum(site["kept"] for site in summary["sites"])
    summary["duplicates_dropped"] = sum(site["duplicates"] for site in summary["sites"])
    for site in summary["sites"]:  # one line per site for the run's page (which shows a list as its length)
        summary[f"site {site['site']}"] = (f"{site['kept']} tasks ({site['info']} info), {site['duplicates']} "
                                           f"duplicates dropped, {site['invalid']} invalid"
                                           + "".join(f"; {problem}" for problem in site["pages_not_read"]))
    versions = sorted(set(ProposalBatch.objects.filter(pipeline_run=pipeline_run).values_list("prompt_version",
                                                                                              flat=True)))
    if versions and versions != [params.prompt_version]:
        summary["prompt versions"] = ", ".join(versions)
        pipeline_run.errors = [*pipeline_run.errors, (  # saved with the finished run (engine/runs.py)
            f"the propose prompt changed during this run (started with {params.prompt_version}; batches were asked "
            f"with {', '.join(versions)}): its tasks came from different prompts; each task names its prompt_version")]
    if params.out:
        summary["written"] = _write_out(pipeline_run, params, sites)
    return summary


def _write_out(pipeline_run: PipelineRun, params: ProposeParams, sites: list[Site]) -> int:
    """Append each site of this run not in the file yet, all its tasks together (as the reference does)."""
    path = path_under_data_root(raw=params.out)
    already = sites_in_file(path)
    return sum(tasks_jsonl_append(path=path, tasks=run_tasks(pipeline_run=pipeline_run, site=site))
               for site in sites if site.slug not in already)


PROPOSE_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.PROPOSE, check=propose_params_check, read=ProposeParams.from_json, units=_units, do=_do,
    finish=_finish, queue="judge",  # the queue of model calls (a threads pool in production)
    batch=1, max_attempts=settings.PROPOSE_MAX_ATTEMPTS,
    nothing_to_do="nothing to propose: every site asked for is done already",
))
