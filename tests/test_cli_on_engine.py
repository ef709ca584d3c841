"""`taskgen import` and `taskgen rows` run on the engine: a PipelineRun of their stage that the pipeline page shows,
with its units and its summary, and that `taskgen resume` finishes after a crash or a failed unit."""
from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from taskgen.models import Episode, Export, PipelineRun, Run
from taskgen.stages.export import output as export_output
from taskgen.stages.import_ import service as importer
from tests.rundirs import build_run
from tests.runfiles import load_run_dir, write_run_dir
from tests.test_rows_export import HAND_TASKS

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch) -> list:
    """Workers sent for runs are recorded, not sent: the command line works its units itself."""
    sent = []
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kw: sent.append(args[0]))
    monkeypatch.setattr("taskgen.engine.worker.backoff_seconds", lambda attempts: 0.0)
    return sent


def _taskgen(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("taskgen", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    return code, out.getvalue(), err.getvalue()


def _lease_ran_out(pipeline_run: PipelineRun) -> None:
    """What time does to a killed worker's units: their leases run out."""
    pipeline_run.units.filter(status="running").update(lease_until=timezone.now() - timedelta(seconds=1))


def test_taskgen_import_is_a_pipeline_run_with_its_summary_as_result(tmp_path):
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"])
    code, out, _ = _taskgen("import", str(run_dir), "--name", "cli-run")
    assert code == 0 and "run 'cli-run'" in out and "episodes: 2 added, 0 updated, 0 unchanged" in out
    pipeline_run = PipelineRun.objects.get(stage="import")
    assert pipeline_run.status == "done" and pipeline_run.run == Run.objects.get(name="cli-run")
    assert list(pipeline_run.units.values_list("status", flat=True)) == ["done"]
    assert pipeline_run.result["episodes_added"] == 2 and pipeline_run.result["run"] == "cli-run"
    assert pipeline_run.params["run_dir"] == str(run_dir)


def test_an_import_outside_the_data_root_is_allowed_from_the_command_line(tmp_path, settings):
    run_dir = build_run(tmp_path / "elsewhere", ["shop-a"])
    assert not run_dir.is_relative_to(settings.DATA_ROOT)
    assert _taskgen("import", str(run_dir))[0] == 0


def test_an_import_that_failed_is_resumed_and_imports_the_run(tmp_path, monkeypatch):
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"])

    def lost_disk(**kwargs):
        raise OSError("the disk went away")

    real_import = importer.import_run_dir
    monkeypatch.setattr(importer, "import_run_dir", lost_disk)  # the import's work reads it from here when it runs
    code, _, err = _taskgen("import", str(run_dir))
    pipeline_run = PipelineRun.objects.get(stage="import")
    assert code == 1 and "the disk went away" in err and f"taskgen resume {pipeline_run.pk}" in err
    assert pipeline_run.units.get().status == "failed" and not Episode.objects.exists()
    monkeypatch.setattr(importer, "import_run_dir", real_import)
    assert _taskgen("resume", str(pipeline_run.pk), "--workers", "1")[0] == 0
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and pipeline_run.result["episodes_added"] == 2
    assert Episode.objects.count() == 2


def test_an_import_killed_midway_is_resumed_and_adds_only_what_is_missing(tmp_path, monkeypatch):
    run_dir = build_run(tmp_path, ["shop-a", "shop-b", "shop-c"])
    real_save, saved = importer.episodes_save, []

    def killed_at_the_second(**kwargs):
        if len(saved) == 1:
            raise KeyboardInterrupt  # the process dies: nothing of the engine's runs after it
        saved.append(real_save(**kwargs))

    monkeypatch.setattr(importer, "SAVE_BATCH", 1)  # one episode a transaction: the kill falls between two
    monkeypatch.setattr(importer, "episodes_save", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        _taskgen("import", str(run_dir))
    pipeline_run = PipelineRun.objects.get(stage="import")
    assert pipeline_run.status == "running" and pipeline_run.units.get().status == "running"
    assert Episode.objects.count() == 1
    monkeypatch.setattr(importer, "episodes_save", real_save)
    _lease_ran_out(pipeline_run)
    assert _taskgen("resume", str(pipeline_run.pk), "--workers", "1")[0] == 0
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and Episode.objects.count() == 3
    assert (pipeline_run.result["episodes_added"], pipeline_run.result["episodes_unchanged"]) == (2, 1)


@pytest.fixture
def hand_run(settings):
    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "hand", HAND_TASKS)
    return load_run_dir(run_dir, tasks_file)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_taskgen_rows_is_an_export_run_with_a_unit_per_episode(hand_run, settings, monkeypatch):
    monkeypatch.chdir(settings.DATA_ROOT)
    code, out, _ = _taskgen("rows", hand_run.name, "--out", "cli-out", "--budget", "9")
    assert code == 0
    pipeline_run = PipelineRun.objects.get(stage="export")
    export = Export.objects.get()
    printed = json.loads(out.strip().splitlines()[-1])
    assert printed == {"export": export.pk, "manifest_sha256": export.manifest_sha256,
                       "out": str(Path(settings.DATA_ROOT).resolve() / "cli-out")}
    assert pipeline_run.status == "done" and pipeline_run.result["export_id"] == export.pk
    written = sorted(p.name for p in (Path(settings.DATA_ROOT) / "cli-out").iterdir() if p.is_dir())
    assert sorted(pipeline_run.units.values_list("key", flat=True)) == written
    assert set(pipeline_run.units.values_list("status", flat=True)) == {"done"}
    assert pipeline_run.result["selected_trajectories"] == len(written) == export.report["selected_trajectories"]


def test_taskgen_rows_killed_midway_is_resumed_and_writes_what_a_whole_export_writes(hand_run, settings,
                                                                                    monkeypatch):
    data = Path(settings.DATA_ROOT)
    assert _taskgen("rows", hand_run.name, "--out", str(data / "whole"), "--budget", "12")[0] == 0
    real_write, written = export_output.episode_write_dir, []

    def killed_at_the_third(**kwargs):
        if len(written) == 2:
            raise KeyboardInterrupt
        written.append(real_write(**kwargs))

    monkeypatch.setattr(export_output, "episode_write_dir", killed_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        _taskgen("rows", hand_run.name, "--out", str(data / "resumed"), "--budget", "12")
    pipeline_run = PipelineRun.objects.filter(stage="export").latest("pk")
    # the batch in hand was not recorded: the folders written before the kill are on disk, complete, and kept
    assert pipeline_run.status == "running" and pipeline_run.units.exclude(status="done").exists()
    folders = [p for p in (data / "resumed").iterdir() if not p.name.startswith(".")]
    assert 2 <= len(folders) < pipeline_run.total
    assert not (data / "resumed" / "_report.json").exists()
    monkeypatch.setattr(export_output, "episode_write_dir", real_write)
    _lease_ran_out(pipeline_run)
    assert _taskgen("resume", str(pipeline_run.pk), "--workers", "1")[0] == 0
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done" and _files(data / "resumed") == _files(data / "whole")
    assert Export.objects.count() == 2


def test_a_command_that_works_its_run_itself_sends_no_workers(tmp_path, _no_broker,
                                                              django_capture_on_commit_callbacks):
    """`taskgen import` and `taskgen judge` with a judge that works here work the units in the command: no worker
    message is sent for them (the judge's 40 cost a quarter of its start). A run started elsewhere gets them."""
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"])
    with django_capture_on_commit_callbacks(execute=True):
        assert _taskgen("import", str(run_dir), "--name", "here-run")[0] == 0
        assert _taskgen("judge", "here-run", "--provider", "rules")[0] == 0
    assert _no_broker == []
    for pipeline_run in PipelineRun.objects.all():
        assert pipeline_run.status == "done" and pipeline_run.woken_at is not None  # counted as woken: by itself


def test_resume_sends_workers_unless_it_works_the_units_itself(tmp_path, _no_broker,
                                                               django_capture_on_commit_callbacks):
    run_dir = build_run(tmp_path, ["shop-a"])
    assert _taskgen("import", str(run_dir), "--name", "resumed")[0] == 0
    pipeline_run = PipelineRun.objects.get(stage="import")
    pipeline_run.units.update(status="failed")
    with django_capture_on_commit_callbacks(execute=True):
        assert _taskgen("resume", str(pipeline_run.pk), "--no-wait")[0] == 0
    assert _no_broker == [pipeline_run.pk]  # the Celery workers take it
    pipeline_run.units.update(status="failed")
    with django_capture_on_commit_callbacks(execute=True):
        assert _taskgen("resume", str(pipeline_run.pk), "--workers", "1")[0] == 0
    assert _no_broker == [pipeline_run.pk]  # worked here: nothing more sent
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == "done"


def test_a_run_worked_here_whose_process_died_gets_workers_once_its_leases_lapse(tmp_path, _no_broker):
    from taskgen.engine.control import run_start
    from taskgen.engine.send import reconcile_now
    from taskgen.engine.units import units_lease

    run_dir = build_run(tmp_path, ["shop-a"])
    pipeline_run = run_start(stage=PipelineRun.Stage.IMPORT, params={"run_dir": str(run_dir), "name": "died"},
                             send_workers=False)
    assert units_lease(pipeline_run_id=pipeline_run.pk, owner="command-line", count=1, lease_seconds=60)
    reconcile_now()
    assert _no_broker == []  # its own process holds the unit
    _lease_ran_out(pipeline_run)  # the process was killed
    reconcile_now()
    assert _no_broker and set(_no_broker) == {pipeline_run.pk}  # as many as the stage gets


def test_resume_queues_a_dead_workers_lapsed_units_at_once_and_leaves_live_ones(tmp_path, _no_broker):
    """A run stuck running (its worker killed): resume queues the units whose lease ran out itself, not at the
    reconciler's next pass (which the command line's wait now makes a period in); a unit under a live lease stays."""
    from taskgen.engine.control import run_resume, run_start
    from taskgen.engine.units import units_lease

    run_dir = build_run(tmp_path, ["shop-a"])
    pipeline_run = run_start(stage=PipelineRun.Stage.IMPORT, params={"run_dir": str(run_dir), "name": "stuck"},
                             send_workers=False)
    assert units_lease(pipeline_run_id=pipeline_run.pk, owner="killed", count=1, lease_seconds=60)
    run_resume(pipeline_run=pipeline_run, send_workers=False)
    assert pipeline_run.units.get().status == "running"  # its holder may still be at work
    _lease_ran_out(pipeline_run)
    run_resume(pipeline_run=pipeline_run, send_workers=False)
    unit = pipeline_run.units.get()
    assert (unit.status, unit.lease_owner, unit.attempts) == ("queued", "", 0)
