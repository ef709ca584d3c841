"""Structured logs: one JSON line per record, one line per request and one per Celery task.

`JsonFormatter` (python-json-logger's, under our field names) is what settings.LOGGING and gunicorn.conf.py format
with. `RequestLogMiddleware` writes one `request` line per request, with the run and episode ids the URL names.
`task_log_connect` hooks Celery's signals to write one `task` line per task, with the run, unit and episode ids found
in its arguments. Nothing here imports
Django's settings or models at import time, so gunicorn can load the formatter before Django starts.
"""
from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from pythonjsonlogger import json as jsonlogger

# The JSON line's names for the record's own fields; anything else on a record came from `extra=` and goes in as named.
_FIELD_NAMES = {"levelname": "level", "name": "logger", "message": "msg", "exc_info": "exc"}
# URL keyword arguments and task parameters that name a run, a unit or an episode, under the name they are logged as.
_ID_NAMES = {"run_id": "run_id", "pipeline_run_id": "pipeline_run_id", "unit_id": "unit_id",
             "episode_id": "episode_id", "export_id": "export_id", "config_id": "judge_config_id"}
_VIEW_PK_NAMES = {"run_detail": "run_id", "episode_detail": "episode_id", "pipeline_detail": "pipeline_run_id",
                  "pipeline_progress": "pipeline_run_id", "export_detail": "export_id", "queue_detail": "queue_id"}

request_log = logging.getLogger("taskgen.request")
task_log = logging.getLogger("taskgen.task")


class JsonFormatter(jsonlogger.JsonFormatter):
    """python-json-logger's formatter, one JSON object per line under our field names: ts, level, logger, msg, the
    record's extra fields, and any traceback (exc) or stack (stack_info), each inside its line."""

    def __init__(self) -> None:
        super().__init__(["levelname", "name", "message"], rename_fields=_FIELD_NAMES, json_ensure_ascii=False)

    def add_fields(self, log_data: dict, record: logging.LogRecord, message_dict: dict) -> None:
        log_data["ts"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        super().add_fields(log_data, record, message_dict)


class ClientErrorsLoggedElsewhere(logging.Filter):
    """Handler filter: drops django.request's line of a 4xx (the request's own line says it); keeps all else.
    Named by its dotted path in settings.LOGGING, so settings imports no app code."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "django.request":
            return True
        return getattr(record, "status_code", 500) >= 500


def _ids_of_view(match) -> dict:
    if match is None:
        return {}
    ids = {_ID_NAMES[k]: v for k, v in match.kwargs.items() if k in _ID_NAMES}
    if "pk" in match.kwargs and match.url_name in _VIEW_PK_NAMES:
        ids[_VIEW_PK_NAMES[match.url_name]] = match.kwargs["pk"]
    return ids


class RequestLogMiddleware:
    """One `request` line per request: method, path, status, milliseconds, user, view and the ids it names."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        user = getattr(request, "user", None)
        fields = {"method": request.method, "path": request.path, "status": response.status_code,
                  "ms": round((time.perf_counter() - started) * 1000, 1),
                  "user": user.get_username() if getattr(user, "is_authenticated", False) else None,
                  "view": match.view_name if match else None, **_ids_of_view(match)}
        level = logging.ERROR if response.status_code >= 500 else logging.INFO
        request_log.log(level, "%s %s %s", request.method, request.path, response.status_code, extra=fields)
        return response


def _task_ids(task, args: tuple, kwargs: dict) -> dict:
    try:
        bound = inspect.signature(task.run).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = dict(kwargs)
    return {_ID_NAMES[k]: v for k, v in bound.items() if k in _ID_NAMES}


_started: dict[str, float] = {}


def _task_started(task_id: str | None = None, **_) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


def _task_finished(task_id: str | None = None, task=None, args=(), kwargs=None, state: str | None = None,
                   **_) -> None:
    began = _started.pop(task_id, None) if task_id else None
    fields = {"task": getattr(task, "name", None), "celery_id": task_id, "state": state,
              "ms": round((time.perf_counter() - began) * 1000, 1) if began else None,
              **_task_ids(task, tuple(args or ()), dict(kwargs or {}))}
    level = logging.INFO if state in {"SUCCESS", "RETRY", "IGNORED"} else logging.WARNING
    task_log.log(level, "task %s %s", fields["task"], state, extra=fields)


def task_log_connect(prerun, postrun) -> None:
    """Connect the one-line-per-task log to Celery's task_prerun and task_postrun signals."""
    prerun.connect(_task_started, weak=False)
    postrun.connect(_task_finished, weak=False)
