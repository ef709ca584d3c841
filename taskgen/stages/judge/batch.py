"""A judge run through Gemini's Batch API, one unit per episode on the engine: the same requests, storage and
guarantees as single calls, at half the price.

A unit's try (`judge_batch_unit`): an episode with a verdict is done; else it finds the open request of its episode
in a job of this run, or submits ONE job for every open unit of the run that has neither a verdict nor a job (cache
hits are stored at once, never sent; a run whose screenshots exceed Gemini's inline size is cut into several jobs;
each job is recorded as being sent, under a name of its own, before it is sent, so a job whose sender died is found
again at Gemini rather than paid for and never collected); then it polls the job (one call for every unit polled
within a few seconds, in this process). A running job is `RetryLater` (not a failed try: the slot is freed, the unit
comes due again); a job that ended without answers, or an answer with an error, fails this unit's try (its next try
submits it again); a succeeded job's answers are all stored once (collecting twice stores nothing twice: the
judgment's unique constraint is the last word).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from taskgen.engine.contract import RetryLater
from taskgen.judging import judgment_fields_of
from taskgen.models import Episode, JudgeBatchJob, JudgeBatchRequest, JudgeConfig, Judgment, PipelineRun, WorkUnit
from taskgen.providers import ProviderError
from taskgen.providers.base import ProviderResult
from taskgen.stages.judge.service import (
    _cost,
    _from_cache,
    episodes_without_verdict,
    judge_request_build,
    judgment_store,
)

log = logging.getLogger(__name__)
BATCH_DISCOUNT = Decimal("0.5")
STATE_CACHE_SECONDS = 5.0  # units polled together make one call; never longer than half the poll interval
State = JudgeBatchJob.State


class BatchJobEnded(RuntimeError):
    """The batch job holding this episode ended without answers (failed, expired, cancelled, gone)."""


class BatchAnswerError(RuntimeError):
    """The batch job answered this episode's request with an error."""


def judge_batch_unit(*, pipeline_run: PipelineRun, config_id: int, episode_id: int) -> str:
    """One episode of a batch judge run: its verdict once its job's answer is stored; RetryLater while the job
    runs; an error for a try whose job ended or whose answer was an error."""
    stored = _stored_verdict(episode_id, config_id)
    if stored:
        return stored
    request = _open_request(pipeline_run.pk, episode_id) or _submit(pipeline_run, config_id, episode_id)
    if request is None:  # answered from the cache while its job was being built
        return Judgment.objects.get(episode_id=episode_id, config_id=config_id).verdict
    if request.job.state == State.SUBMITTING:
        _submitting(request.job)  # RetryLater while it is being sent; found again (or not) if its sender died
        request = JudgeBatchRequest.objects.select_related("job").get(pk=request.pk)
        if not request.open:
            raise RetryLater(1, f"batch job {request.job.display_name} never reached Gemini: sending it again")
    if request.job.state == State.RUNNING:
        judge_batch_job_poll(job=request.job, config_id=config_id)
    return _outcome(request.pk, config_id)


def _stored_verdict(episode_id: int, config_id: int) -> str | None:
    return (Judgment.objects.filter(episode_id=episode_id, config_id=config_id)
            .exclude(verdict=Judgment.Verdict.NONE).values_list("verdict", flat=True).first())


def _open_request(pipeline_run_id: int, episode_id: int) -> JudgeBatchRequest | None:
    return (JudgeBatchRequest.objects.filter(job__pipeline_run_id=pipeline_run_id, episode_id=episode_id, open=True)
            .select_related("job").order_by("-pk").first())


# ── submit: one job for every open unit of the run that has no verdict and no job ────────────────────────────────

def _submit(pipeline_run: PipelineRun, config_id: int, episode_id: int) -> JudgeBatchRequest | None:
    """Under a lock on the run's row (one submitter at a time), record a job for this episode and every other open
    unit of the run without a verdict or a job, then send it; None when this episode was answered from the cache.
    The job is recorded (committed, 'being sent', under a name of its own) before it is sent: a sender killed after
    Gemini took the job leaves a row by which a later try finds the job again, instead of a paid job nobody
    collects."""
    config = JudgeConfig.objects.get(pk=config_id)
    with transaction.atomic():
        PipelineRun.objects.select_for_update().filter(pk=pipeline_run.pk).first()
        request = _open_request(pipeline_run.pk, episode_id)  # submitted by another unit while this one waited
        if request is not None:
            return request
        pending = _build_pending(_episodes_to_send(pipeline_run, config), config)
        if episode_id not in pending:
            return None
        jobs = [(_job_record(pipeline_run, part), part) for part in _jobs_of(pending, first=episode_id)]
    for number, (job, part) in enumerate(jobs):
        try:
            name = _send(config, job.display_name, part)
        except (RetryLater, ProviderError) as exc:
            for unsent, _ in jobs[number:]:
                _job_not_sent(unsent, f"not sent: {exc}")
            if number == 0:
                raise  # this unit's own job: its try fails
            log.warning("batch job %s of %s not sent; its units send it on their tries", number, pipeline_run)
            break
        JudgeBatchJob.objects.filter(pk=job.pk, state=State.SUBMITTING).update(name=name, state=State.RUNNING)
    return _open_request(pipeline_run.pk, episode_id)


def _job_record(pipeline_run: PipelineRun, part: dict[int, tuple]) -> JudgeBatchJob:
    job = JudgeBatchJob.objects.create(pipeline_run=pipeline_run, state=State.SUBMITTING,
                                       display_name=f"taskgen-judge-{pipeline_run.pk}-{uuid.uuid4().hex[:12]}")
    JudgeBatchRequest.objects.bulk_create(
        [JudgeBatchRequest(job=job, episode_id=pk, **extra) for pk, (_, extra) in part.items()])
    return job


def _job_not_sent(job: JudgeBatchJob, why: str) -> None:
    """A job that never reached Gemini: ended, its requests closed, so their units' next tries send them again."""
    JudgeBatchJob.objects.filter(pk=job.pk, state=State.SUBMITTING).update(
        state=State.ENDED, job_state=why[:300], finished_at=timezone.now())
    JudgeBatchRequest.objects.filter(job=job).update(open=False)


def _submit_grace_seconds() -> float:
    """How long a job may be 'being sent' before a unit looks for it at Gemini: a live sender has recorded it, or
    failed, by then (the SDK's timeout, twice, and a margin)."""
    return 2 * settings.JUDGE_TIMEOUT_SECONDS + 30


def _submitting(job: JudgeBatchJob) -> None:
    """A job still 'being sent': RetryLater while its sender may be at work; after that, its sender died: the job
    is looked for at Gemini by the name it was sent under, adopted if Gemini has it, else closed to be sent again."""
    from taskgen.providers.gemini_batch import gemini_batch_find

    age = (timezone.now() - job.created_at).total_seconds()
    if age < _submit_grace_seconds():
        raise RetryLater(min(10.0, _submit_grace_seconds() - age), f"batch job {job.display_name} is being sent")
    try:
        name = gemini_batch_find(display_name=job.display_name)
    except ProviderError as exc:
        if not exc.transient:
            raise
        raise RetryLater(exc.retry_after or 30, f"batch service busy: {exc}") from exc
    with transaction.atomic():
        locked = JudgeBatchJob.objects.select_for_update().get(pk=job.pk)
        if locked.state != State.SUBMITTING:
            return  # another unit settled it meanwhile
        if name:
            JudgeBatchJob.objects.filter(pk=job.pk).update(
                name=name, state=State.RUNNING, job_state="found again at Gemini: its sender died before recording it")
        else:
            _job_not_sent(locked, "its sender died before it reached Gemini")


def _jobs_of(pending: dict[int, tuple], *, first: int) -> list[dict[int, tuple]]:
    """The requests cut into jobs of at most settings.JUDGE_BATCH_JOB_BYTES of screenshots each (usually one job),
    the job holding episode `first` first."""
    jobs: list[dict[int, tuple]] = [{}]
    size = 0
    for pk, (request, extra) in pending.items():
        if jobs[-1] and size + extra["image_bytes"] > settings.JUDGE_BATCH_JOB_BYTES:
            jobs.append({})
            size = 0
        jobs[-1][pk] = (request, extra)
        size += extra["image_bytes"]
    return sorted(jobs, key=lambda job: first not in job)


def _episodes_to_send(pipeline_run: PipelineRun, config: JudgeConfig) -> list[int]:
    """The run's queued or running episodes with no verdict under the config and in no open batch request (NOT
    EXISTS both: episodes_without_verdict says why not NOT IN)."""
    keys = pipeline_run.units.filter(status__in=[WorkUnit.Status.QUEUED, WorkUnit.Status.RUNNING]).values_list(
        "key", flat=True)
    asked = JudgeBatchRequest.objects.filter(job__pipeline_run=pipeline_run, open=True, episode=OuterRef("pk"))
    pending = episodes_without_verdict(Episode.objects.filter(pk__in=[int(key) for key in keys]), config)
    return list(pending.filter(~Exists(asked)).order_by("pk").values_list("pk", flat=True))


def _build_pending(episode_ids: list[int], config: JudgeConfig) -> dict[int, tuple]:
    """Requests for the episodes to send, by episode id; episodes answered by the cache are stored here."""
    pending = {}
    for episode in Episode.objects.filter(pk__in=episode_ids).select_related("task").order_by("pk"):
        built = judge_request_build(episode=episode, config=config)
        extra = {"request_hash": built.request_hash, "image_bytes": built.image_bytes}
        cached = _from_cache(built.request_hash)
        if cached:
            judgment_store(episode_id=episode.pk, config_id=config.pk, fields={**cached, **extra})
        else:
            pending[episode.pk] = (built.request, extra)
    return pending


def _send(config: JudgeConfig, display_name: str, pending: dict[int, tuple]) -> str:
    """Submit the job; a busy service is a counted try again later, as a busy model is for single calls."""
    from taskgen.providers.gemini_batch import gemini_batch_submit  # the SDK (40 MB) only where it is used

    try:
        return gemini_batch_submit(model=config.model, display_name=display_name,
                                   requests={str(pk): request for pk, (request, _) in pending.items()})
    except ProviderError as exc:
        if not exc.transient:
            raise
        raise RetryLater(exc.retry_after or 0, f"batch service busy: {exc}", counts=True) from exc


# ── poll and collect ─────────────────────────────────────────────────────────────────────────────────────────────

_states: dict[str, tuple[float, object]] = {}
_states_lock = threading.Lock()


def batch_states_forget() -> None:
    """Drop the states read lately (tests: the next poll asks the service)."""
    with _states_lock:
        _states.clear()


def _job_state(job: JudgeBatchJob):
    """The job's state at the service, read at most once every few seconds in this process."""
    from taskgen.providers.gemini_batch import gemini_batch_get

    keep = min(STATE_CACHE_SECONDS, settings.JUDGE_BATCH_POLL_SECONDS / 2)
    with _states_lock:
        seen = _states.get(job.name)
        if seen and seen[0] > time.monotonic():
            return seen[1]
    keys = [str(pk) for pk in job.requests.order_by("pk").values_list("episode_id", flat=True)]
    state = gemini_batch_get(name=job.name, keys=keys)
    with _states_lock:
        _states[job.name] = (time.monotonic() + keep, state)
    return state


def judge_batch_job_poll(*, job: JudgeBatchJob, config_id: int) -> None:
    """Collect the job once it succeeded (again: nothing is stored twice), or mark it ended; RetryLater while it
    runs or the service cannot say."""
    poll = settings.JUDGE_BATCH_POLL_SECONDS
    try:
        state = _job_state(job)
    except ProviderError as exc:
        if exc.transient:
            raise RetryLater(exc.retry_after or poll, f"batch job {job.name}: {exc}") from exc
        state = None  # the job cannot be read (gone): it ended for us
    if state is not None and state.running:
        if job.job_state != state.state:
            JudgeBatchJob.objects.filter(pk=job.pk, state=State.RUNNING).update(job_state=state.state)
        raise RetryLater(poll, f"batch job {job.name} is {state.state}")
    if state is not None and state.succeeded:
        _collect(job, state, config_id)
        return
    why = state.state if state is not None else "unreadable"
    JudgeBatchJob.objects.filter(pk=job.pk, state=State.RUNNING).update(
        state=State.ENDED, job_state=why, finished_at=timezone.now())


def _collect(job: JudgeBatchJob, state, config_id: int) -> None:
    """Store every answer of a succeeded job once (the job's row is locked: one collector) and keep each
    request's error."""
    config = JudgeConfig.objects.get(pk=config_id)
    with transaction.atomic():
        locked = JudgeBatchJob.objects.select_for_update().get(pk=job.pk)
        if locked.state != State.RUNNING:
            return
        requests = {str(r.episode_id): r for r in locked.requests.all()}
        answered = set()
        for answer in state.answers:
            request = requests.get(answer.key)
            if request is None:
                continue  # not ours: never store an answer under a guessed episode
            answered.add(answer.key)
            if answer.result is None:
                request.error = answer.error or "no answer"
                continue
            fields = {**_fields(config, answer.result), "request_hash": request.request_hash,
                      "image_bytes": request.image_bytes}
            judgment_store(episode_id=request.episode_id, config_id=config.pk, fields=fields)
        for key in set(requests) - answered:
            requests[key].error = "the job's output has no answer for it"
        JudgeBatchRequest.objects.bulk_update(list(requests.values()), ["error"])
        JudgeBatchJob.objects.filter(pk=job.pk).update(state=State.COLLECTED, job_state=state.state,
                                                       finished_at=timezone.now())


def _fields(config: JudgeConfig, result: ProviderResult) -> dict:
    return {**judgment_fields_of(result.text), "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens, "latency_ms": 0,
            "cost_usd": (_cost(config.model, result.input_tokens, result.output_tokens) * BATCH_DISCOUNT)
            .quantize(Decimal("0.000001")), "source": "batch"}


def _outcome(request_pk: int, config_id: int) -> str:
    """What the ended job holds for this unit, taken once: the request is closed, so the next try submits again."""
    request = JudgeBatchRequest.objects.select_related("job").get(pk=request_pk)
    JudgeBatchRequest.objects.filter(pk=request_pk).update(open=False)
    job = request.job
    if job.state == State.ENDED:
        raise BatchJobEnded(f"batch job {job.name} ended {job.job_state}")
    if request.error:
        raise BatchAnswerError(f"batch job {job.name} answered with an error: {request.error}")
    return Judgment.objects.get(episode_id=request.episode_id, config_id=config_id).verdict
