"""The judge stage: one episode's verdict under one judge config, and the start of a judge pass over a run.

`judge_episode` is safe to run twice and from many workers at once: a verdict already stored is returned as it is,
identical requests are answered from an earlier judgment or from an answer kept when it arrived (never paid twice,
even when the worker that received it was killed before storing it), and the (episode, config) unique
constraint decides when two workers race. An answer with no verdict is stored as "NONE" with its raw text and is
judged again on the next pass, as the reference does.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Exists, OuterRef, QuerySet

from taskgen.blobs import blob_file_of
from taskgen.db_connections import connections_renew
from taskgen.engine.contract import RetryLater
from taskgen.judging import VERDICTS, judgment_fields_of, unsupported_citations_count
from taskgen.models import Episode, JudgeAnswer, JudgeConfig, Judgment, Run, Task
from taskgen.providers import (
    ProviderError,
    ProviderImage,
    ProviderRequest,
    ProviderResult,
    provider_can,
    provider_check,
    provider_default_model,
    provider_for,
    provider_missing,
    provider_offline,
)
from taskgen.providers.exchanges import exchanges_limited
from taskgen.providers.pricing import model_cost_usd
from taskgen.providers.retry import call_with_retries, retry_delay  # noqa: F401 (retry_delay: the judge's rule too)
from taskgen.providers.rules import VERSION as RULES_VERSION
from taskgen.stages.judge import images as judge_images
from taskgen.stages.judge.evidence import EVIDENCE_FIELDS, Evidence, evidence_for_episode
from taskgen.stages.judge.in_flight import calls_in_flight
from taskgen.stages.judge.prompt import judge_prompt
from taskgen.stages.judge.rate_limit import rate_limit_acquire, rate_limit_take

log = logging.getLogger(__name__)
RULES_MODEL = RULES_VERSION  # a new version of the baseline is a new judge config: verdicts never mix
NO_VERDICT_TRIES = 3  # the reference asks again, up to three times, when an answer has no verdict


class JudgeError(ValueError):
    """A judge pass that cannot start: unknown provider, model or prompt version, missing key."""


@dataclass
class JudgeRequest:
    """What one judgment sends: the provider request, the evidence it came from, and its hash for the cache."""

    request: ProviderRequest
    evidence: Evidence
    image_paths: list[str]
    image_bytes: int
    request_hash: str


def _default_image_policy(provider: str) -> str:
    """settings.JUDGE_IMAGE_POLICY; for a provider without Gemini's media_resolution, the downscaled copy instead."""
    name = settings.JUDGE_IMAGE_POLICY
    return "small" if judge_images.image_policy(name).media_resolution and not provider_can(
        provider, "media_resolution") else name


def judge_config_for(provider: str | None = None, model: str | None = None, prompt_version: str | None = None,
                     image_policy: str | None = None) -> JudgeConfig:
    """The JudgeConfig row for these choices (made if new); defaults come from settings and the prompt file."""
    provider = provider or settings.JUDGE_PROVIDER
    try:
        provider_check(provider, "judge")
    except ValueError as exc:
        raise JudgeError(str(exc)) from exc
    if missing := provider_missing(provider):
        raise JudgeError(f"{missing}; or judge offline with the {provider_offline('judge')} provider")
    # An offline baseline has one model, and a provider that reads no screenshots is sent none, whatever a form
    # or command line passed along.
    model = RULES_MODEL if provider_can(provider, "offline") else (model or provider_default_model(provider))
    policy = (image_policy or _default_image_policy(provider)) if provider_can(provider, "images") else "none"
    if judge_images.image_policy(policy).media_resolution and not provider_can(provider, "media_resolution"):
        raise JudgeError(f"image policy {policy!r} is Gemini's media_resolution; with {provider} use "
                         "small, default or full")  # (an unknown policy name fails in image_policy)
    in_use = judge_prompt().version
    if prompt_version and prompt_version != in_use:
        # A config names the prompt its verdicts came from; another label would make comparisons lie.
        raise JudgeError(f"the judge prompt in use is version {in_use!r}, not {prompt_version!r}; "
                         "point TASKGEN_JUDGE_PROMPT_FILE at the prompt file you mean")
    config, _ = JudgeConfig.objects.get_or_create(
        provider=provider, model=model, prompt_version=in_use, image_policy=policy)
    return config


def _request_hash(request: ProviderRequest, provider: str) -> str:
    digest = hashlib.sha256()
    head = {"provider": provider, "model": request.model, "system": request.system, "prompt": request.prompt,
            "json_mode": request.json_mode}
    if request.media_resolution:  # only when set: requests hashed before the setting existed keep their hash
        head["media_resolution"] = request.media_resolution
    digest.update(json.dumps(head, sort_keys=True, ensure_ascii=False).encode())
    for image in request.images:
        digest.update(image.mime_type.encode() + b"\0" + hashlib.sha256(image.data).digest())
    return digest.hexdigest()


def judge_request_build(*, episode: Episode, config: JudgeConfig) -> JudgeRequest:
    """The exact request a judge config sends for an episode (also what --dry-run prints)."""
    prompt = judge_prompt()
    if prompt.version != config.prompt_version:
        raise JudgeError(f"judge config wants prompt {config.prompt_version!r} but the prompt file "
                         f"{prompt.path} is {prompt.version!r}")
    evidence = evidence_for_episode(episode=episode)
    policy = judge_images.image_policy(config.image_policy)
    shots = evidence.screenshots if policy.max_side != 0 else []
    images = [ProviderImage(*judge_images.prepared_image(sha256=s.sha256, content_type=s.content_type,
                                                         policy=policy), label=s.name) for s in shots]
    request = ProviderRequest(model=config.model, system=prompt.system, prompt=prompt.render(evidence),
                              images=images, json_mode=True, evidence=evidence,
                              media_resolution=policy.media_resolution if images else None)
    return JudgeRequest(request=request, evidence=evidence, image_paths=[blob_file_of(s.sha256) for s in shots],
                        image_bytes=sum(len(i.data) for i in images),
                        request_hash=_request_hash(request, config.provider))


def _call_once(config: JudgeConfig, request: ProviderRequest) -> ProviderResult:
    """One call under the rate limit, for a worker slot: a full rate window or a transient error raises RetryLater
    (the engine re-queues the episode for then) instead of sleeping."""
    provider = provider_for(config.provider)  # first: importing an SDK takes a while, the slot is for the call
    if not provider_can(config.provider, "offline"):
        wait = rate_limit_take(model=config.model)
        if wait > 0:
            raise RetryLater(wait, f"rate limit of {config.model}: wait {wait:.0f} s")
    try:
        with exchanges_limited(calls_in_flight()):
            return provider.complete(request)
    except ProviderError as exc:
        if not exc.transient:
            raise
        raise RetryLater(exc.retry_after or 0, f"model busy: {exc}", counts=True) from exc


def _call_with_retries(config: JudgeConfig, request: ProviderRequest, *, in_worker: bool = False) -> ProviderResult:
    """Call the provider; transient errors are retried up to settings.JUDGE_MAX_ATTEMPTS, under the rate limit
    (in this process, for the command line's own threads; a worker slot calls once and is re-queued)."""
    if in_worker:
        return _call_once(config, request)
    provider = provider_for(config.provider)
    limit = None if provider_can(config.provider, "offline") else (lambda: rate_limit_acquire(model=config.model))

    def call() -> ProviderResult:
        with exchanges_limited(calls_in_flight()):
            return provider.complete(request)

    return call_with_retries(call, attempts=settings.JUDGE_MAX_ATTEMPTS, before=limit, what="judge call")


_cost = model_cost_usd


def _ask(config: JudgeConfig, built: JudgeRequest, in_worker: bool = False) -> dict:
    """The judgment's fields from the model: asked again (up to NO_VERDICT_TRIES) while it gives no verdict. An
    answer with a verdict is kept (JudgeAnswer) before anything else is done with it."""
    used_in = used_out = latency = 0
    for _ in range(NO_VERDICT_TRIES):
        try:
            result = _call_with_retries(config, built.request, in_worker=in_worker)
        except ProviderError as exc:
            return {"verdict": Judgment.Verdict.NONE, "error": str(exc)[:2000], "input_tokens": used_in,
                    "output_tokens": used_out, "latency_ms": latency,
                    "cost_usd": _cost(config.model, used_in, used_out)}
        used_in, used_out = used_in + result.input_tokens, used_out + result.output_tokens
        latency += result.latency_ms
        answer = judgment_fields_of(result.text)
        if answer["verdict"] in VERDICTS:
            _answer_keep(JudgeAnswer(request_hash=built.request_hash, model=config.model, text=result.text,
                                     input_tokens=used_in, output_tokens=used_out, latency_ms=latency))
            break
    return {**answer, "input_tokens": used_in, "output_tokens": used_out, "latency_ms": latency,
            "cost_usd": _cost(config.model, used_in, used_out)}


def _insert(row) -> bool:
    """Insert a row unless one with its unique key is there already (another worker's); whether it was inserted.
    Outside a transaction it is one statement (a transaction's BEGIN and COMMIT are two more round trips, as
    bulk_create's and atomic's cost); inside one, a savepoint keeps a refused insert from breaking it."""
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            row.save(force_insert=True)
    except IntegrityError:
        return False
    return True


def _answer_keep(answer: JudgeAnswer) -> None:
    """Keep a paid answer until its judgment is stored. The connection may have been ended while the call waited
    (PostgreSQL restarted): then once more on a new one, or the retry would pay for the call again."""
    try:
        _insert(answer)
    except OperationalError:
        if connection.in_atomic_block:
            raise
        connections_renew()
        _insert(answer)


CACHE_SQL = """
SELECT (SELECT id FROM {judgment} WHERE request_hash = %s AND verdict <> %s ORDER BY id LIMIT 1),
       (SELECT id FROM {answer} WHERE request_hash = %s)"""


def _cached_ids(request_hash: str) -> tuple[int | None, int | None]:
    """The first judgment with a verdict for this request and the answer kept for it, if any: one round trip (the
    common case is neither, and two ORM queries to say so were a tenth of a judgment's CPU)."""
    quote = connection.ops.quote_name
    sql = CACHE_SQL.format(judgment=quote(Judgment._meta.db_table), answer=quote(JudgeAnswer._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [request_hash, Judgment.Verdict.NONE, request_hash])
        earlier, kept = cursor.fetchone()
    return earlier, kept


def _from_cache(request_hash: str, *, again: bool = True) -> dict | None:
    """The very same request answered before: an earlier judgment's verdict, copied at no cost, or an answer that
    arrived and was paid for but whose judgment was never stored (its worker was killed in between), recorded now
    with its cost."""
    earlier_id, kept_id = _cached_ids(request_hash)
    earlier = Judgment.objects.filter(pk=earlier_id).first() if earlier_id is not None else None
    if earlier is not None:
        return {"verdict": earlier.verdict, "parts": earlier.parts, "raw_response": earlier.raw_response,
                "error": "", "inconsistent": earlier.inconsistent, "input_tokens": 0, "output_tokens": 0,
                "latency_ms": 0, "cost_usd": Decimal("0"), "source": "cache"}
    kept = JudgeAnswer.objects.filter(pk=kept_id).first() if kept_id is not None else None
    if kept is None:  # none kept; or its judgment was stored (and it forgotten) just now: that one, then
        return _from_cache(request_hash, again=False) if kept_id is not None and again else None
    return {**judgment_fields_of(kept.text), "input_tokens": kept.input_tokens, "output_tokens": kept.output_tokens,
            "latency_ms": kept.latency_ms, "cost_usd": _cost(kept.model, kept.input_tokens, kept.output_tokens),
            "source": "judge"}


def judgment_store(*, episode_id: int, config_id: int, fields: dict) -> Judgment:
    """Write a judgment unless a verdict is already stored (that one wins); the unique constraint is the last word."""
    if "unsupported_citations" not in fields:
        fields = {**fields, "unsupported_citations": unsupported_citations_count(episode_id=episode_id,
                                                                                  parts=fields.get("parts") or [])}
    judgment = Judgment(episode_id=episode_id, config_id=config_id, **fields)
    if _insert(judgment):
        return judgment
    # a row exists: an earlier "no verdict", or another worker's verdict stored meanwhile
    with transaction.atomic():
        current = Judgment.objects.select_for_update().get(episode_id=episode_id, config_id=config_id)
        if current.has_verdict:
            return current
        for name, value in fields.items():
            setattr(current, name, value)
        current.save()
        return current


EPISODE_SQL = """
SELECT {columns}, t.instruction AS task_instruction,
       EXISTS(SELECT 1 FROM {judgment} j WHERE j.episode_id = e.id AND j.config_id = %s AND j.verdict <> %s) AS judged
FROM {episode} e JOIN {task} t ON t.id = e.task_id WHERE e.id = %s"""


def _episode_read(episode_id: int, config_id: int) -> Episode:
    """The episode with only its evidence fields and its task's instruction, as select_related("task").only(...)
    reads it, and whether it has a verdict under the config (`judged`: most episodes a run's units name have none
    yet), in one plain statement: the ORM's queryset took 0.7 ms of CPU a judgment to build, this 0.3 in all."""
    quote = connection.ops.quote_name
    names = ("id", "task", *(name for name in EVIDENCE_FIELDS if "__" not in name))
    columns = ", ".join(f"e.{quote(Episode._meta.get_field(name).column)}" for name in names)
    sql = EPISODE_SQL.format(columns=columns, episode=quote(Episode._meta.db_table), task=quote(Task._meta.db_table),
                             judgment=quote(Judgment._meta.db_table))
    episode = next(iter(Episode.objects.raw(sql, [config_id, Judgment.Verdict.NONE, episode_id])), None)
    if episode is None:
        raise Episode.DoesNotExist(f"there is no episode {episode_id}")
    episode.task = Task.from_db(episode._state.db, ["id", "instruction"], [episode.task_id, episode.task_instruction])
    return episode


def judge_episode(*, episode_id: int, config_id: int, pipeline_run_id: int | None = None,
                  in_worker: bool = False, config: JudgeConfig | None = None) -> Judgment:
    """One episode's judgment under one config: the stored verdict if there is one, else judged now and stored
    (in_worker: a busy model or a full rate window raises RetryLater rather than waiting here; `config`: the
    config's row when the caller has it, else it is read)."""
    episode = _episode_read(episode_id, config_id)
    done = Judgment.objects.filter(episode_id=episode_id, config_id=config_id).exclude(
        verdict=Judgment.Verdict.NONE).first() if episode.judged else None
    if done is not None:
        return done
    if config is None or config.pk != config_id:
        config = JudgeConfig.objects.get(pk=config_id)
    built = judge_request_build(episode=episode, config=config)
    fields = _from_cache(built.request_hash) or {**_ask(config, built, in_worker), "source": "judge"}
    fields.update(request_hash=built.request_hash, image_bytes=built.image_bytes,
                  unsupported_citations=unsupported_citations_count(
                      episode_id=episode_id, parts=fields.get("parts") or [], episode=episode,
                      step_files=built.evidence.step_files))
    judgment = judgment_store(episode_id=episode_id, config_id=config_id, fields=fields)
    _answer_forget(built.request_hash)  # recorded: the judgment is the cache now
    return judgment


FORGET_SQL = "DELETE FROM {table} WHERE request_hash = %s"


def _answer_forget(request_hash: str) -> None:
    """The kept answer deleted in one statement (QuerySet.delete wraps even a plain delete in a transaction: two
    more round trips for every judgment)."""
    with connection.cursor() as cursor:
        cursor.execute(FORGET_SQL.format(table=connection.ops.quote_name(JudgeAnswer._meta.db_table)), [request_hash])


def episodes_without_verdict(episodes: QuerySet[Episode], config: JudgeConfig) -> QuerySet[Episode]:
    """Those of `episodes` with no verdict under `config` (no judgment, or one with verdict NONE). Asked as NOT
    EXISTS, an anti-join: `pk NOT IN (judged ids)` reads the judged ids again for every episode once they do not fit
    in work_mem (a run of a million, mostly judged: still running after minutes, where this takes half a second)."""
    judged = Judgment.objects.filter(episode=OuterRef("pk"), config=config).exclude(verdict=Judgment.Verdict.NONE)
    return episodes.filter(~Exists(judged))


def episodes_left_to_judge(*, run: Run, config: JudgeConfig) -> QuerySet[Episode]:
    """The run's recorded episodes with no verdict yet under `config` (no judgment, or one with verdict NONE), in
    task order. Failed episodes (a harness error, no grade inputs) are skipped, as the reference skips them."""
    pending = episodes_without_verdict(run.episodes.filter(status=Episode.Status.RECORDED), config)
    return pending.order_by("task_order", "pk")


def episodes_to_judge(*, run: Run, config: JudgeConfig) -> list[int]:
    """Ids of episodes_left_to_judge, in task order."""
    return list(episodes_left_to_judge(run=run, config=config).values_list("pk", flat=True))


def judge_summary(*, run: Run, config: JudgeConfig, errors: int = 0) -> dict:
    """The reference's summary line: episodes, success, rate, no_verdict, errors, judge."""
    verdicts = list(Judgment.objects.filter(config=config, episode__run=run).values_list("verdict", flat=True))
    success = verdicts.count(Judgment.Verdict.SUCCESS)
    return {"episodes": len(verdicts), "success": success, "rate": round(success / max(1, len(verdicts)), 4),
            "no_verdict": verdicts.count(Judgment.Verdict.NONE), "errors": errors, "judge": config.model}


def judgment_reference_record(judgment: Judgment) -> dict:
    """A judgment as the reference writes `<run>_judge/<task_id>.json`."""
    return {"task_id": judgment.episode.task.task_id, "predicted_label": judgment.predicted_label,
            "verdict": judgment.has_verdict, "response": judgment.raw_response, "model": judgment.config.model}
