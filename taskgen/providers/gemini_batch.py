"""Gemini's Batch API (half the price of single calls, answered within a day): submit inlined requests, poll the
job, collect the answers by their key. Same SDK client and base URL as the single calls."""
from __future__ import annotations

from dataclasses import dataclass

from google.genai import errors as genai_errors
from google.genai import types

from taskgen.providers.base import ProviderError, ProviderRequest, ProviderResult
from taskgen.providers.gemini import _config, _contents, gemini_client, retry_hint_seconds
from taskgen.providers.retry import status_transient

RUNNING_STATES = {"JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_QUEUED", "JOB_STATE_UNSPECIFIED"}


@dataclass
class BatchAnswer:
    """One request's answer in a finished batch: a result, or the error the batch gave for it."""

    key: str
    result: ProviderResult | None
    error: str = ""


@dataclass
class BatchState:
    name: str
    state: str
    answers: list[BatchAnswer]

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "JOB_STATE_SUCCEEDED"


def _provider_error(exc: genai_errors.APIError) -> ProviderError:
    return ProviderError(f"gemini batch {exc.code}: {str(exc.message or exc)[:300]}",
                         transient=status_transient(exc.code), status=exc.code,
                         retry_after=retry_hint_seconds(exc))


def gemini_batch_submit(*, model: str, requests: dict[str, ProviderRequest], display_name: str) -> str:
    """Submit one batch job of inlined requests, each tagged with its key; returns the job's name."""
    inlined = [types.InlinedRequest(contents=_contents(r), config=_config(r), metadata={"key": key})
               for key, r in requests.items()]
    try:
        job = gemini_client().batches.create(model=model, src=inlined,
                                             config=types.CreateBatchJobConfig(display_name=display_name))
    except genai_errors.APIError as exc:
        raise _provider_error(exc) from exc
    return job.name


def _answer(key: str, item: types.InlinedResponse) -> BatchAnswer:
    if item.error or item.response is None:
        return BatchAnswer(key, None, str(item.error.message if item.error else "no response")[:2000])
    usage = item.response.usage_metadata
    result = ProviderResult(text=item.response.text or "",
                            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
                            output_tokens=((usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0))
                            if usage else 0)
    return BatchAnswer(key, result)


def gemini_batch_get(*, name: str, keys: list[str]) -> BatchState:
    """The job's state and, once it succeeded, every answer by key (answers come back in request order when the
    server does not echo the key)."""
    try:
        job = gemini_client().batches.get(name=name)
    except genai_errors.APIError as exc:
        raise _provider_error(exc) from exc
    state = str(job.state.value if hasattr(job.state, "value") else job.state)
    items = (job.dest.inlined_responses or []) if job.dest else []
    answers = [_answer((item.metadata or {}).get("key") or (keys[i] if i < len(keys) else ""), item)
               for i, item in enumerate(items)]
    return BatchState(name=name, state=state, answers=answers)


def gemini_batch_find(*, display_name: str) -> str | None:
    """The name of the job submitted under `display_name` (each job the app sends has its own), or None when the
    service holds none: how a job whose submitter died before recording it is found again."""
    try:
        for job in gemini_client().batches.list(config=types.ListBatchJobsConfig(page_size=100)):
            if job.display_name == display_name:
                return job.name
    except genai_errors.APIError as exc:
        raise _provider_error(exc) from exc
    return None
