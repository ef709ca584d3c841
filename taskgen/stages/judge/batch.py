"""Judging a run through Gemini's Batch API: the same requests, storage and guarantees as single calls, at half
the price. `judge_batch_start` submits every episode still without a verdict (cache hits are stored at once) and
remembers the job on its PipelineRun; `judge_batch_poll` collects the answers once the job is done. Collecting twice
stores nothing twice: a verdict already stored wins (the judgment's unique constraint is the last word)."""
from __future__ import annotations

from decimal import Decimal

from taskgen.judging import parse_judge_response, verdict_is_inconsistent
from taskgen.models import Episode, JudgeConfig, PipelineRun, Run
from taskgen.pipeline_runs import (
    pipeline_run_create,
    pipeline_run_error,
    pipeline_run_finish,
    pipeline_run_start,
    pipeline_run_step,
)
from taskgen.providers.base import ProviderResult
from taskgen.stages.judge.service import (
    JudgeError,
    _cost,
    _from_cache,
    episodes_to_judge,
    judge_request_build,
    judge_summary,
    judgment_store,
)

BATCH_DISCOUNT = Decimal("0.5")


def _fields(config: JudgeConfig, result: ProviderResult) -> dict:
    parsed = parse_judge_response(result.text)
    return {"verdict": parsed.verdict, "parts": parsed.parts, "raw_response": result.text, "error": parsed.error,
            "inconsistent": verdict_is_inconsistent(parsed.verdict, parsed.parts),
            "input_tokens": result.input_tokens, "output_tokens": result.output_tokens, "latency_ms": 0,
            "cost_usd": (_cost(config.model, result.input_tokens, result.output_tokens) * BATCH_DISCOUNT)
            .quantize(Decimal("0.000001")), "source": "batch"}


def _build_pending(run: Run, config: JudgeConfig, pipeline_run_id: int) -> dict:
    """Requests for the episodes to send; episodes answered by the cache are stored and counted here."""
    pending = {}
    for episode in Episode.objects.filter(pk__in=episodes_to_judge(run=run, config=config)).select_related("task"):
        built = judge_request_build(episode=episode, config=config)
        cached = _from_cache(built.request_hash)
        extra = {"request_hash": built.request_hash, "image_bytes": built.image_bytes}
        if cached:
            judgment_store(episode_id=episode.pk, config_id=config.pk, fields={**cached, **extra})
            pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=True)
        else:
            pending[str(episode.pk)] = (built.request, extra)
    return pending


def judge_batch_start(*, run: Run, config: JudgeConfig, user=None) -> PipelineRun:
    """Submit one batch job for the run's episodes without a verdict (the caller has it polled until done; a run
    with nothing to send is finished at once)."""
    if config.provider != "gemini":
        raise JudgeError("the Batch API is Gemini's: use --provider gemini, or judge without --batch")
    total = len(episodes_to_judge(run=run, config=config))
    pipeline_run = pipeline_run_create(stage=PipelineRun.Stage.JUDGE, user=user, run=run, total=total,
                                       params={"judge": config.key, "config_id": config.pk, "batch": True})
    pipeline_run_start(pipeline_run_id=pipeline_run.pk, total=total)
    pending = _build_pending(run, config, pipeline_run.pk)
    if not pending:
        pipeline_run_finish(pipeline_run_id=pipeline_run.pk, result=judge_summary(run=run, config=config))
        return pipeline_run
    from taskgen.providers.gemini_batch import gemini_batch_submit  # the SDK (40 MB) only where it is used

    name = gemini_batch_submit(model=config.model, display_name=f"taskgen-{run.name}-{pipeline_run.pk}",
                               requests={key: request for key, (request, _) in pending.items()})
    pipeline_run.params = {**pipeline_run.params, "batch_name": name, "keys": list(pending),
                           "extra": {key: extra for key, (_, extra) in pending.items()}}
    pipeline_run.save(update_fields=["params"])
    return pipeline_run


def judge_batch_poll(*, pipeline_run_id: int) -> bool:
    """Collect the batch if it has finished; True when the PipelineRun is closed, False to poll again later."""
    pipeline_run = PipelineRun.objects.select_related("run").get(pk=pipeline_run_id)
    if pipeline_run.is_finished:
        return True
    params = pipeline_run.params
    config = JudgeConfig.objects.get(pk=params["config_id"])
    from taskgen.providers.gemini_batch import gemini_batch_get

    state = gemini_batch_get(name=params["batch_name"], keys=params["keys"])
    if state.running:
        return False
    if not state.succeeded:
        pipeline_run_error(pipeline_run_id=pipeline_run_id, error=f"batch {state.name} ended {state.state}")
        pipeline_run_finish(pipeline_run_id=pipeline_run_id, failed=True,
                            result=judge_summary(run=pipeline_run.run, config=config, errors=len(params["keys"])))
        return True
    for answer in state.answers:
        if answer.key not in params["extra"]:
            continue  # not ours: never store an answer under a guessed episode
        if answer.result is None:
            pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=False, error=f"episode {answer.key}: {answer.error}")
            continue
        fields = {**_fields(config, answer.result), **params["extra"][answer.key]}
        judgment_store(episode_id=int(answer.key), config_id=config.pk, fields=fields)
        pipeline_run_step(pipeline_run_id=pipeline_run_id, ok=True)
    pipeline_run_finish(pipeline_run_id=pipeline_run_id, result=judge_summary(run=pipeline_run.run, config=config))
    return True
