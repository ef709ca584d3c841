"""A propose run worked by a real Celery worker process (queue `judge`, the queue of model calls), against the fake
Gemini server: every batch done, each site's tasks kept once, the tasks file written when the run finishes."""
from __future__ import annotations

import json

import pytest

from taskgen.engine.control import run_start
from taskgen.models import PipelineRun, Task
from tests import propose_helpers
from tests.fakes.gemini_server import FakeGemini
from tests.test_judge_celery import _purge_judge_queue, _start_worker, _stop_worker, _wait_for

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_and_fake(django_db_blocker, tmp_path, settings, monkeypatch):
    fake = FakeGemini(latency=0.2).start()
    monkeypatch.setenv("TASKGEN_DATA_ROOT", str(settings.DATA_ROOT))  # the worker writes the tasks file there
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = fake.base_url
    _purge_judge_queue()
    log_path = tmp_path / "worker.log"
    process = _start_worker(fake, log_path, concurrency=2)
    process.log_path = log_path
    yield process, fake
    _stop_worker(process)
    fake.stop()


def test_a_propose_run_is_worked_by_a_celery_worker(sandbox_sites, worker_and_fake, settings):
    worker, fake = worker_and_fake
    out = settings.DATA_ROOT / "proposed" / "tasks.jsonl"
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={
        "provider": "gemini", "sites": "shop,booking", "per_site": 12, "batch": 6, "out": str(out)})
    assert pipeline_run.total == 2 * (2 + 2)  # two batches per site and two spare ones
    _wait_for(lambda: PipelineRun.objects.get(pk=pipeline_run.pk).is_finished, 120, "the propose run",
              worker.log_path)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 8, 0)
    assert pipeline_run.result["written"] == 24 and "summary_error" not in pipeline_run.result
    for slug in ("shop", "booking"):
        assert Task.objects.filter(site__slug=slug, proposal_batch__pipeline_run=pipeline_run).count() == 12
    assert len(fake.requests) == 4  # the spare batches found their sites full and asked nothing
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["site"] for line in lines] == ["shop"] * 12 + ["booking"] * 12
