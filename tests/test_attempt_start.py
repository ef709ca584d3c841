"""Starting an attempt: bad input is refused with a clear message and leaves nothing behind."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import ResumeError, run_cancel, run_resume, run_start
from taskgen.engine.units import Status
from taskgen.engine.worker import work
from taskgen.harness.rundir import EpisodeRecord
from taskgen.models import PipelineRun, WorkUnit
from taskgen.stages.attempt import service
from taskgen.stages.attempt.service import AttemptError, attempt_tasks_read
from taskgen.stages.attempt.work import AttemptParams

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    """Workers sent for a run (no broker here): (pipeline_run_id, workers) pairs."""
    calls = []
    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: calls.append((pk, n)))
    return calls


def attempt_start(**params):
    return run_start(stage="attempt", params={**params, "tasks_file": str(params["tasks_file"])})


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in sandbox_tasks()[:3]), encoding="utf-8")
    return path


def test_attempt_start_writes_the_run_dir_and_one_unit_per_episode(tasks_file, settings, sent):
    pipeline_run = attempt_start(tasks_file=tasks_file, agent="scripted", name="r1", mistakes=0.2, seed=3,
                                 limit=2, agent_options={"temperature": 0})
    assert (pipeline_run.stage, pipeline_run.status, pipeline_run.total) == ("attempt", "running", 2)
    params = AttemptParams.from_json(pipeline_run.params)
    assert (params.seed, params.mistakes, params.limit, params.agent_options) == (3, 0.2, 2, {"temperature": 0})
    assert list(pipeline_run.units.values_list("key", "status")) == [("sb-shop-001", "queued"),
                                                                     ("sb-shop-002", "queued")]
    assert sent == [(pipeline_run.pk, 2)]
    run_dir = settings.DATA_ROOT / "attempts" / "r1"
    assert [json.loads(x)["task_id"] for x in (run_dir / "tasks.jsonl").read_text().splitlines()] == \
        ["sb-shop-001", "sb-shop-002"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"agent": "gpt"}, "unknown agent 'gpt'"),
    ({"name": "../escape"}, "plain name"),
    ({"mistakes": 1.5}, "between 0 and 1"),
    ({"mistakes": "lots"}, "must be a number"),
    ({"limit": 0}, "at least 1"),
    ({"agent_options": ["x"]}, "JSON object"),
])
def test_attempt_start_refuses_bad_parameters(tasks_file, kwargs, message):
    with pytest.raises(AttemptError, match=message):
        attempt_start(**{"tasks_file": tasks_file, "agent": "scripted", "name": "ok", **kwargs})
    assert not PipelineRun.objects.exists()


def test_a_run_name_is_used_once(tasks_file):
    attempt_start(tasks_file=tasks_file, agent="scripted", name="twice")
    with pytest.raises(AttemptError, match="already exists"):
        attempt_start(tasks_file=tasks_file, agent="scripted", name="twice")
    assert PipelineRun.objects.count() == 1


@pytest.mark.parametrize(("text", "message"), [
    ("", "holds no tasks"),
    ("{not json\n", "line 1 is not JSON"),
    ('{"task_id": "a/b", "site": "shop", "instruction": "x"}\n', "task_id 'a/b' is not a plain name"),
    ('{"task_id": "t1", "instruction": "x"}\n', "needs a site and an instruction"),
    ('{"task_id": "t1", "site": "s", "instruction": "x"}\n{"task_id": "t1", "site": "s", "instruction": "y"}\n',
     "appears twice"),
])
def test_a_bad_tasks_file_is_refused_with_its_line(tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AttemptError, match=message):
        attempt_tasks_read(tasks_file=path)


def test_the_command_reports_bad_input_and_exits_2(tmp_path):
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("taskgen", "attempt", "--tasks", str(tmp_path / "missing.jsonl"), "--name", "x", "--inline",
                     stdout=StringIO(), stderr=err)
    assert exit_info.value.code == 2
    assert "cannot read the tasks file" in err.getvalue()


def test_a_cancelled_attempt_resumes_only_the_episodes_not_done(tasks_file, sent):
    pipeline_run = attempt_start(tasks_file=tasks_file, agent="scripted", name="r-resume")
    WorkUnit.objects.filter(pipeline_run=pipeline_run, key="sb-shop-001").update(status=Status.DONE,
                                                                                 result={"task_id": "sb-shop-001"})
    WorkUnit.objects.filter(pipeline_run=pipeline_run, key="sb-shop-002").update(status=Status.FAILED, attempts=3,
                                                                                 last_error="the browser died")
    assert run_cancel(pipeline_run=pipeline_run)
    resumed = run_resume(pipeline_run=pipeline_run)
    assert resumed.pk == pipeline_run.pk and resumed.status == PipelineRun.Status.RUNNING
    units = dict(pipeline_run.units.values_list("key", "status"))
    assert units == {"sb-shop-001": "done", "sb-shop-002": "queued", "sb-shop-003": "queued"}
    assert pipeline_run.units.get(key="sb-shop-002").attempts == 0
    assert sent[-1] == (pipeline_run.pk, 2)


def test_an_attempt_with_every_episode_done_has_nothing_to_resume(tasks_file):
    pipeline_run = attempt_start(tasks_file=tasks_file, agent="scripted", name="r-done")
    pipeline_run.units.update(status=Status.DONE)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(status=PipelineRun.Status.DONE)
    with pytest.raises(ResumeError, match="nothing to resume"):
        run_resume(pipeline_run=pipeline_run)


def _recorded(task, agent, options, max_steps, label):
    """An episode as the harness records it, without a browser: one step, its row and a verifier that passed."""
    return EpisodeRecord(task=task, agent=agent, actions=[{"done": {}}], rows=[{"step": 1, "image": "step_1.png"}],
                         row_screens=[1], shots=[b"\x89PNG"], verifier={"ok": True, "parts": []}, finished="done")


def _work_until_settled(pipeline_run) -> None:
    for _ in range(10):
        WorkUnit.objects.filter(pipeline_run=pipeline_run, status="queued").update(not_before=None)
        if work(pipeline_run_id=pipeline_run.pk, owner="test") is None and PipelineRun.objects.get(
                pk=pipeline_run.pk).is_finished:
            return


def test_an_episode_whose_folder_cannot_be_written_fails_loudly_and_a_resume_finishes_it(tasks_file, monkeypatch):
    monkeypatch.setattr("taskgen.stages.attempt.service._record", _recorded)
    written = service.episode_write

    def disk_full_for_one(*, record, run_dir):
        if record.task_id == "sb-shop-002":
            raise OSError(28, "No space left on device")
        return written(record=record, run_dir=run_dir)

    monkeypatch.setattr("taskgen.stages.attempt.service.episode_write", disk_full_for_one)
    pipeline_run = attempt_start(tasks_file=tasks_file, agent="scripted", name="r-disk")
    _work_until_settled(pipeline_run)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 2, 1)
    failed = pipeline_run.units.get(key="sb-shop-002")
    assert failed.status == "failed" and failed.attempts == 3 and "No space left on device" in failed.last_error
    assert any("sb-shop-002" in e and "could not be written" in e for e in pipeline_run.errors)  # said, not lost
    assert pipeline_run.result["failed"] == 1 and pipeline_run.run.episodes.count() == 2

    monkeypatch.setattr("taskgen.stages.attempt.service.episode_write", written)  # the disk has room again
    run_resume(pipeline_run=pipeline_run)
    _work_until_settled(pipeline_run)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == ("done", 3, 0)
    assert pipeline_run.result["failed"] == 0 and pipeline_run.run.episodes.count() == 3
    assert set(pipeline_run.units.values_list("attempts", flat=True)) == {1}  # only the failed one ran again
