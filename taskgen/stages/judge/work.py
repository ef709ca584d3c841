"""The judge stage as the engine runs it: one unit per recorded episode still without a verdict, judged by a call
each, or (batch) through one Gemini Batch API job its units poll (taskgen/stages/judge/batch.py)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings

from taskgen.concurrency import judge_threads_for
from taskgen.engine.contract import NothingToDo, StageParams, StageParamsError, StageWork
from taskgen.engine.stage_table import stage_register
from taskgen.models import Episode, JudgeConfig, PipelineRun, Run
from taskgen.providers import provider_check, provider_load_now
from taskgen.stages.judge.batch import judge_batch_unit
from taskgen.stages.judge.in_flight import calls_in_flight_choose
from taskgen.stages.judge.service import JudgeError, episodes_to_judge, judge_config_for, judge_episode, judge_summary

# A batch run's units are leased this many at a time: those polled together make one call to the batch service.
BATCH_LEASE = 1000


@dataclass(frozen=True)
class JudgeParams(StageParams):
    """Which run, under which judge config (its key is kept for pages); batch: through Gemini's Batch API."""

    run: int
    config_id: int
    judge: str = ""
    batch: bool = False


def judge_params_check(raw: dict) -> JudgeParams:
    """The parameters of a judge run from a form, the command line or an admin action: the run must exist and the
    judge config must be one this install can run (provider, key, prompt version, image policy)."""
    run = Run.objects.filter(pk=raw.get("run") or 0).first()
    if run is None:
        raise StageParamsError(f"there is no run {raw.get('run')!r} to judge")
    if raw.get("config_id"):
        config = JudgeConfig.objects.filter(pk=raw["config_id"]).first()
        if config is None:
            raise StageParamsError(f"there is no judge config {raw['config_id']!r}")
    else:
        try:
            config = judge_config_for(raw.get("provider"), raw.get("model"), raw.get("prompt_version"),
                                      raw.get("image_policy"))
        except (JudgeError, ValueError) as exc:
            raise StageParamsError(str(exc)) from exc
    batch = bool(raw.get("batch"))
    if batch:  # the one check of a batch judge run, whoever starts it (form, command line, admin)
        try:
            provider_check(config.provider, "batch")
        except ValueError as exc:
            raise StageParamsError(f"{exc}, or judge without batch") from exc
    return JudgeParams(run=run.pk, config_id=config.pk, judge=config.key, batch=batch)


def _units(params: JudgeParams) -> list[str]:
    run, config = Run.objects.get(pk=params.run), JudgeConfig.objects.get(pk=params.config_id)
    keys = [str(pk) for pk in episodes_to_judge(run=run, config=config)]
    if not keys:
        raise NothingToDo(f"nothing to judge: every recorded episode of {run.name} has a verdict under {config.key}"
                          if run.episodes.filter(status=Episode.Status.RECORDED).exists()
                          else f"nothing to judge: {run.name} has no recorded episodes")
    return keys


def _do(pipeline_run: PipelineRun, params: JudgeParams, key: str) -> str:
    if params.batch:
        return judge_batch_unit(pipeline_run=pipeline_run, config_id=params.config_id, episode_id=int(key))
    judgment = judge_episode(episode_id=int(key), config_id=params.config_id, pipeline_run_id=pipeline_run.pk,
                             in_worker=True, config=_config(params.config_id, params.judge))
    return judgment.verdict


@lru_cache(maxsize=32)
def _config(config_id: int, key: str) -> JudgeConfig | None:
    """A judge config's row, read once per process for a run's units (a config's fields are its identity: they
    never change); None (judge_episode reads it) unless the row is the one the run's parameters name."""
    config = JudgeConfig.objects.filter(pk=config_id).first()
    return config if config is not None and config.key == key else None


def judge_threads_here(provider: str, calls: int) -> int:
    """Threads for a process judging a run's units itself with `calls` in flight (`taskgen judge --workers N`,
    `taskgen resume` of a judge run): the provider's SDK is loaded now, before the threads start (provider_load_now
    says why), the process keeps `calls` in flight, and a few more threads prepare the next episodes while they
    wait."""
    if calls:
        provider_load_now(provider)
    calls_in_flight_choose(calls or None)
    return judge_threads_for(calls) if calls > 1 else calls


def _here(params: JudgeParams, workers: int) -> int:
    if params.batch:  # the batch job's units poll it: no calls of their own
        return workers
    return judge_threads_here(JudgeConfig.objects.values_list("provider", flat=True).get(pk=params.config_id), workers)


def _finish(pipeline_run: PipelineRun, params: JudgeParams, failed: int) -> dict:
    run, config = Run.objects.get(pk=params.run), JudgeConfig.objects.get(pk=params.config_id)
    return judge_summary(run=run, config=config, errors=failed)


JUDGE_WORK = stage_register(StageWork(
    name=PipelineRun.Stage.JUDGE, check=judge_params_check, read=JudgeParams.from_json, units=_units, do=_do,
    finish=_finish, queue="judge", batch=1, batch_of=lambda params: BATCH_LEASE if params.batch else 1,
    max_attempts=settings.JUDGE_MAX_ATTEMPTS,
    # A message per judge-worker thread, for two workers: surplus ones wait in the queue and find nothing to do.
    workers=2 * settings.JUDGE_THREADS,
    nothing_to_do="nothing to judge: every recorded episode of the run has a verdict under this judge",
    run_of=lambda params: params.run, here=_here,
))
