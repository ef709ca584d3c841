"""Propose tasks for a site, one batch at a time: build the ask (focus, avoid-list, prompt), get an answer from the
proposer, keep what the rules allow (taskgen/stages/propose/keep.py) as Task rows waiting for review, and record the
batch. No Celery here: the engine calls `propose_batch` once per unit (taskgen/stages/propose/work.py)."""
from __future__ import annotations

import hashlib
import json
import random
import threading
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from taskgen.engine.contract import RetryLater
from taskgen.models import PipelineRun, ProposalBatch, Site, Task
from taskgen.providers import ProviderError, ProviderRequest, provider_can, provider_for
from taskgen.stages.propose import rules
from taskgen.stages.propose.context import SiteContext, site_context_build, sitemap_of
from taskgen.stages.propose.keep import (
    AnswerUnreadable,
    Sorted,
    answer_items,
    grounding_note,
    normalised,
    proposed_record,
    sort_items,
)
from taskgen.stages.propose.prompt import INFO_SHARE, propose_prompt

AVOID_SHOWN, AVOID_CHARS = 40, 90  # the site's latest tasks shown as "do not repeat", each cut to 90 characters
FOCUS_PAGES = 4
PROPOSER_TEMPERATURE = 1.0  # variety: a batch should not repeat the last one's goals
SPARE = 4  # a batch asks for a few more than the site still needs: some come back as duplicates or fragments


@dataclass(frozen=True)
class BatchAsk:
    """What one batch asks a proposer for."""

    site: str
    index: int
    n: int
    focus: str
    focus_pages: list[str]
    avoid: list[str]


def focus_for(context: SiteContext, *, index: int, seed: int) -> tuple[str, list[str]]:
    """The batch's focus: every third batch (from the first) the main sections, the others a few pages picked by a
    seeded draw, so successive batches look at different parts of the site."""
    if index % 3 == 0:
        return "Most of these goals should be about the site's main sections.", []
    pages = [p for p in context.paths if p != context.home] or [context.home]
    picked = random.Random(f"{seed}:{context.site}:{index}").sample(pages, min(FOCUS_PAGES, len(pages)))
    return "Most of these goals should involve these pages: " + ", ".join(picked) + ".", picked


def avoid_list(site: Site) -> list[str]:
    """The site's most recent tasks (any run, any state), cut short, for the proposer not to repeat."""
    latest = Task.objects.filter(site=site).order_by("-created_at", "-pk").values_list("instruction", flat=True)
    return [text[:AVOID_CHARS] for text in latest[:AVOID_SHOWN]]


def kept_in_run(*, pipeline_run_id: int, site: Site) -> int:
    return Task.objects.filter(proposal_batch__pipeline_run_id=pipeline_run_id, site=site).count()


# ── the site's context, built once per run and process (a site's pages are read once, not once per batch) ───────

_contexts: dict[tuple, SiteContext] = {}
_building: dict[tuple, threading.Lock] = {}
_contexts_lock = threading.Lock()


def context_for_run(*, pipeline_run_id: int, site: Site) -> SiteContext:
    """The site's context for this run, built by the first batch that needs it (one lock per site: other sites'
    batches do not wait for it)."""
    # the site's own content is in the key: a run id alone can come back (SQLite reuses the last rowid after a
    # rollback or delete), and a context kept for another run's site must never be served
    key = (pipeline_run_id, site.pk, site.slug, site.base_url,
           hashlib.sha256(json.dumps(site.sitemap, sort_keys=True, default=str).encode()).hexdigest())
    with _contexts_lock:
        if len(_contexts) > 64:
            _contexts.clear()
            _building.clear()
        lock = _building.setdefault(key, threading.Lock())
    with lock:
        if key not in _contexts:
            _contexts[key] = site_context_build(site=site)
        return _contexts[key]


# ── one batch ─────────────────────────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class Proposer:
    """Who answers: a provider name from the app's provider list (`rules` is the offline baseline) and its model."""

    provider: str
    model: str
    seed: int = 0

    @property
    def model_shown(self) -> str:
        return rules.VERSION if provider_can(self.provider, "offline") else self.model


def _answer(proposer: Proposer, site: Site, context: SiteContext, ask: BatchAsk, system: str, prompt: str) -> str:
    if provider_can(proposer.provider, "offline"):  # the offline baseline proposes from the sitemap
        return rules.rules_answer(sitemap=sitemap_of(site), site_name=context.name, n=ask.n,
                                  n_info=round(ask.n * INFO_SHARE), focus=ask.focus_pages,
                                  avoid={normalised(a) for a in Task.objects.filter(site=site).values_list(
                                      "instruction", flat=True)},
                                  seed=f"{proposer.seed}:{site.slug}:{ask.index}")
    request = ProviderRequest(model=proposer.model, system=system, prompt=prompt, json_mode=True,
                              temperature=PROPOSER_TEMPERATURE)
    try:
        return provider_for(proposer.provider).complete(request).text
    except ProviderError as exc:
        if exc.transient:
            raise RetryLater(exc.retry_after or 0, f"model busy: {exc}", counts=True) from exc
        raise


def propose_batch(*, pipeline_run_id: int, site_slug: str, index: int, per_site: int, batch: int,
                  proposer: Proposer) -> dict:
    """Do batch `index` of a site in a run: ask, answer, keep. Safe to run twice (a recorded batch is returned as
    it is); a site that has its `per_site` tasks in this run is not asked again."""
    site = Site.objects.get(slug=site_slug)
    done = ProposalBatch.objects.filter(pipeline_run_id=pipeline_run_id, site=site, index=index).first()
    if done is not None:
        return batch_result(done)
    room = per_site - kept_in_run(pipeline_run_id=pipeline_run_id, site=site)
    if room <= 0:
        return {"site": site_slug, "batch": index, "skipped": "the site has its tasks already"}
    context = context_for_run(pipeline_run_id=pipeline_run_id, site=site)
    focus, focus_pages = focus_for(context, index=index, seed=proposer.seed)
    ask = BatchAsk(site=site_slug, index=index, n=min(batch, room + SPARE), focus=focus, focus_pages=focus_pages,
                   avoid=avoid_list(site))
    prompt_file = propose_prompt()
    prompt = prompt_file.render(name=context.name, home=context.home, context=context.text, n=ask.n, focus=focus,
                                avoid=ask.avoid)
    text = _answer(proposer, site, context, ask, prompt_file.system, prompt)
    recorded = ProposalBatch(
        pipeline_run_id=pipeline_run_id, site=site, index=index, focus=focus, avoid=ask.avoid, context=context.text,
        context_problems=context.problems, prompt=prompt, raw_answer=text, asked=ask.n, provider=proposer.provider,
        model=proposer.model_shown, prompt_version=prompt_file.version)
    return batch_result(batch_keep(batch=recorded, answer=text, per_site=per_site, context=context))


def batch_keep(*, batch: ProposalBatch, answer: str, per_site: int, context: SiteContext) -> ProposalBatch:
    """Sort the answer's items and save the kept ones with the batch, in one transaction; the site's row is locked
    so that concurrent batches of a site never keep the same task twice or more than `per_site`."""
    try:
        items = answer_items(answer)
    except AnswerUnreadable as exc:
        items, batch.answer_error = [], str(exc)[:500]
    try:
        with transaction.atomic():
            Site.objects.select_for_update().get(pk=batch.site_id)
            seen = {normalised(t) for t in Task.objects.filter(site_id=batch.site_id).values_list(
                "instruction", flat=True)}
            room = per_site - kept_in_run(pipeline_run_id=batch.pipeline_run_id, site=batch.site)
            result = sort_items(items, seen=seen, room=max(room, 0))
            _save(batch, result, context)
    except IntegrityError:  # the same batch recorded by another worker meanwhile: theirs stands
        return ProposalBatch.objects.get(pipeline_run_id=batch.pipeline_run_id, site=batch.site, index=batch.index)
    return batch


def _save(batch: ProposalBatch, result: Sorted, context: SiteContext) -> None:
    records = [proposed_record(site=context.site, instruction=k["instruction"], start_path=context.home,
                               task_kind=k["kind"]) for k in result.kept]
    taken = set(Task.objects.filter(task_id__in=[r["task_id"] for r in records]).values_list("task_id", flat=True))
    fresh = []
    for record in records:  # another text with an id already taken (md5's first 8 hex) counts as a duplicate
        if record["task_id"] not in taken:
            taken.add(record["task_id"])
            fresh.append(record)
    batch.kept, batch.invalid = len(fresh), result.invalid
    batch.duplicates = result.duplicates + len(records) - len(fresh)
    batch.save()
    Task.objects.bulk_create([_task_row(batch, record, context) for record in fresh])


def _task_row(batch: ProposalBatch, record: dict, context: SiteContext) -> Task:
    return Task(task_id=record["task_id"], site_id=batch.site_id, instruction=record["instruction"],
                task_kind=record["task_kind"], source="proposed", start_path=record["start_path"],
                macro="proposed", verifier=None, proposed_by_model=batch.model, prompt_version=batch.prompt_version,
                raw=record, review_state=Task.ReviewState.PROPOSED, proposal_batch=batch,
                grounding_note=grounding_note(record["instruction"], context.known))


def batch_result(batch: ProposalBatch) -> dict:
    """What a unit's result says about its batch (shown on the run's page)."""
    result = {"site": batch.site.slug, "batch": batch.index, "kept": batch.kept, "duplicates": batch.duplicates,
              "invalid": batch.invalid}
    if batch.answer_error:
        result["answer_error"] = batch.answer_error
    if batch.context_problems:
        result["context_problems"] = batch.context_problems
    return result


def run_tasks(*, pipeline_run: PipelineRun, site: Site):
    """The tasks a run kept for a site, in the order they were proposed."""
    return Task.objects.filter(proposal_batch__pipeline_run=pipeline_run, site=site).order_by(
        "proposal_batch__index", "pk")
