"""Structured logs: one JSON line per request (with the ids its URL names) and one per Celery task (with the run, unit
and episode ids of its arguments); a refused page is one line."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from taskgen.celery import app as celery_app
from taskgen.logs import JsonFormatter
from tests.factories import RunFactory


@celery_app.task(name="tests.test_logs.unit_task")
def unit_task(pipeline_run_id: int, unit_id: int, episode_id: int | None = None) -> str:
    return "done"


def _lines(caplog, logger: str) -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == logger]


@pytest.mark.django_db
def test_each_request_is_one_json_line_with_the_run_it_shows(viewer_client, caplog):
    run = RunFactory(name="logged-run")
    with caplog.at_level(logging.INFO, logger="taskgen.request"):
        viewer_client.get(run.get_absolute_url())
    [line] = _lines(caplog, "taskgen.request")
    assert line["status"] == 200 and line["run_id"] == run.pk and line["user"] == "viewer-user"
    assert line["view"] == "review:run_detail" and line["method"] == "GET" and isinstance(line["ms"], float)


def test_each_celery_task_is_one_json_line_with_its_ids(caplog):
    with caplog.at_level(logging.INFO, logger="taskgen.task"):
        unit_task.apply(args=(7,), kwargs={"unit_id": 42, "episode_id": 9})
    [line] = _lines(caplog, "taskgen.task")
    assert line["task"] == "tests.test_logs.unit_task" and line["state"] == "SUCCESS"
    assert (line["pipeline_run_id"], line["unit_id"], line["episode_id"]) == (7, 42, 9)


def test_a_traceback_stays_inside_its_json_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, exc_info=sys.exc_info())
    text = JsonFormatter().format(record)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exc"]


def test_a_line_has_the_named_fields_and_its_extras_as_given():
    record = logging.makeLogRecord({"name": "taskgen.request", "levelname": "INFO", "levelno": logging.INFO,
                                    "msg": "GET %s %s", "args": ("/runs/ü/", 200), "created": 1_796_000_000.25,
                                    "run_id": 3, "where": Path("/data/run"), "_private": "kept out"})
    text = JsonFormatter().format(record)
    assert "ü" in text  # as written, not \u escaped
    assert json.loads(text) == {"ts": "2026-11-30T00:53:20.250+00:00", "level": "INFO", "logger": "taskgen.request",
                                "msg": "GET /runs/ü/ 200", "run_id": 3, "where": "/data/run"}
