"""A worker SIGKILLed (with its children) at about 40% of an attempt run and of an export run: after a new worker
starts, each run finishes by itself (Celery beat's reconciler hands the dead worker's units on when their short lease
runs out), with nothing lost and nothing doubled. Real processes: Celery workers and beat, Redis, PostgreSQL, and
Chromium for the attempt.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection

from sandbox.catalog import sandbox_tasks
from taskgen import celery_app
from taskgen.blobs import blob_path_of
from taskgen.engine.control import run_start
from taskgen.models import Episode, Export, JudgeConfig, PipelineRun, Run, WorkUnit
from taskgen.stages.export.service import export_create
from taskgen.stages.export.work import export_manifest_read
from tests.celery_processes import ROOT, kill_group
from tests.runfiles import HandTask, load_run_dir, write_run_dir
from tests.test_engine_faults import SHORT_LEASES, _wait_for

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]
ATTEMPT_TASKS = 10


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("kills workers mid-transaction with several processes writing: needs PostgreSQL (DATABASE_URL)")


@pytest.fixture
def processes(tmp_path, settings, monkeypatch):
    """Start Celery workers (on the given queues) and beat on the test database; every process is killed after."""
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda *args, **kwargs: False)  # beat wakes the run
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.celery_worker_settings",
           "TASKGEN_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "TASKGEN_MEDIA_ROOT": str(settings.MEDIA_ROOT), "TASKGEN_DATA_ROOT": str(settings.DATA_ROOT),
           "CELERY_BROKER_URL": django_settings.CELERY_BROKER_URL, **SHORT_LEASES,
           "TASKGEN_EXPORT_WORKERS": "1"}  # one writer: episodes written in order, so the kill lands where it blocks
    started: list[subprocess.Popen] = []

    def start(kind: str, queues: str = "default", concurrency: int = 1) -> subprocess.Popen:
        name = f"{kind}-{uuid.uuid4().hex[:6]}"
        command = [sys.executable, "-m", "celery", "-A", "taskgen", "worker", "-Q", queues, "--pool", "prefork",
                   "--concurrency", str(concurrency), "--loglevel", "INFO", "--without-heartbeat",
                   "--without-mingle", "--without-gossip", "-n", f"{name}@%h"]
        if kind == "beat":
            command = [sys.executable, "-m", "celery", "-A", "taskgen", "beat", "-s", str(tmp_path / name)]
        log = (tmp_path / f"{name}.log").open("w")
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        started.append(process)
        return process

    celery_app.control.purge()  # stray messages from earlier runs must not run against this test's data
    yield start
    for process in started:
        kill_group(process)
    for log in sorted(tmp_path.glob("*.log")):  # shown when the test fails
        print(f"── {log.name}\n{log.read_text()[-3000:]}")


def _settled(pipeline_run: PipelineRun) -> int:
    return WorkUnit.objects.filter(pipeline_run=pipeline_run, status__in=["done", "failed"]).count()


def _finished(pipeline_run: PipelineRun) -> bool:
    return PipelineRun.objects.get(pk=pipeline_run.pk).is_finished


@pytest.mark.browser
def test_an_attempt_run_whose_worker_is_killed_at_40_percent_finishes_by_itself(processes, tmp_path):
    if not (os.path.exists(django_settings.HARNESS_CHROMIUM) or shutil.which(django_settings.HARNESS_CHROMIUM)):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail("Chromium not found and TASKGEN_REQUIRE_BROWSER is set")
        pytest.skip("Chromium not found")
    tasks = sandbox_tasks()[:ATTEMPT_TASKS]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    pipeline_run = run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": "scripted",
                                                      "name": "killed-attempt", "mistakes": 0.0})
    processes("beat")
    worker = processes("worker", "browser,default", concurrency=2)  # default: the reconciler
    _wait_for(lambda: _settled(pipeline_run) >= ATTEMPT_TASKS * 0.4, 240, "40% of the attempt")
    kill_group(worker)  # its Chromium and its episodes in flight die with it
    processes("worker", "browser,default", concurrency=2)
    _wait_for(lambda: _finished(pipeline_run), 300, "the attempt to finish")

    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", ATTEMPT_TASKS, 0), \
        list(WorkUnit.objects.exclude(status="done").values_list("key", "status", "last_error"))
    run = Run.objects.get(name="killed-attempt")
    episodes = Episode.objects.filter(run=run)
    assert sorted(episodes.values_list("task__task_id", flat=True)) == sorted(t["task_id"] for t in tasks)
    assert pipeline_run.result["episodes"] == ATTEMPT_TASKS and pipeline_run.result["failed"] == 0
    for episode in episodes.select_related("site"):  # each episode's evidence is its own run's, recorded once
        assert episode.request_log and episode.status == Episode.Status.RECORDED
        assert all(e["path"].startswith(f"/sites/{episode.site.slug}/") for e in episode.request_log)
    results = (Path(pipeline_run.params["run_dir"]) / "results.jsonl").read_text().splitlines()
    assert len(results) == ATTEMPT_TASKS  # one verifier line per episode, none twice


def _blocking_entry(manifest: dict, at: int) -> tuple[str, str]:
    """The first episode from position `at` on whose first row image no earlier episode shares: (task id, sha)."""
    earlier: set[str] = set()
    for position, entry in enumerate(manifest["episodes"]):
        shas = {sha for _, sha in entry["images"]}
        if position >= at and entry["images"] and entry["images"][0][1] not in earlier:
            return entry["task_id"], entry["images"][0][1]
        earlier |= shas
    raise AssertionError("no episode to block on")


def test_an_export_run_whose_worker_is_killed_at_40_percent_finishes_by_itself(processes, settings):
    data = Path(settings.DATA_ROOT)
    hand = [HandTask(site, n, rows=1 + (n % 3)) for n in range(1, 7) for site in ("alpha", "beta", "gamma")]
    run = load_run_dir(*write_run_dir(data / "big", hand))
    config = JudgeConfig.objects.get()
    reference = export_create(run=run, source="judge", judge_config=config, budget=10_000, out_dir="reference")
    pipeline_run = run_start(stage="export", params={"run": run.pk, "source": "judge", "judge_config": config.pk,
                                                     "budget": 10_000, "out_dir": "rows"})
    manifest = export_manifest_read(pipeline_run.params["manifest_sha256"])
    total = len(manifest["episodes"])
    blocked, sha = _blocking_entry(manifest, at=int(total * 0.4))
    image = blob_path_of(sha).read_bytes()
    blob_path_of(sha).unlink()
    os.mkfifo(blob_path_of(sha))  # the worker blocks on this episode's image: it is killed while writing it
    processes("beat")
    worker = processes("worker")
    out = data / "rows"
    _wait_for(lambda: (out / f".partial-{blocked}").is_dir(), 120, f"the worker to be writing {blocked}")
    written_before = {p.name: p.stat().st_ino for p in out.iterdir() if not p.name.startswith(".")}
    assert 0.25 * total <= len(written_before) <= 0.6 * total
    kill_group(worker)
    blob_path_of(sha).unlink()
    blob_path_of(sha).write_bytes(image)
    processes("worker")
    _wait_for(lambda: _finished(pipeline_run), 120, "the export to finish")

    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", total, 0), pipeline_run.errors
    assert Export.objects.exclude(pk=reference.pk).count() == 1  # recorded once
    assert pipeline_run.result["export_id"] == Export.objects.exclude(pk=reference.pk).get().pk
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in (data / "reference").iterdir())
    for name, inode in written_before.items():
        assert (out / name).stat().st_ino == inode  # written once: not written again after the kill
    for path in (data / "reference").rglob("*"):  # byte for byte what an export made at once writes
        if path.is_file():
            assert (out / path.relative_to(data / "reference")).read_bytes() == path.read_bytes(), path
