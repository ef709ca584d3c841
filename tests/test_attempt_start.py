"""Starting an attempt: bad input is refused with a clear message and leaves nothing behind."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from sandbox.catalog import sandbox_tasks
from taskgen.models import PipelineRun
from taskgen.stages.attempt.service import AttemptError, attempt_prepare, attempt_tasks_read
from taskgen.stages.attempt.tasks import attempt_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in sandbox_tasks()[:3]), encoding="utf-8")
    return path


def test_attempt_start_writes_the_run_dir_and_a_queued_pipeline_run(tasks_file, settings):
    pipeline_run = attempt_start(tasks_file=tasks_file, agent="scripted", name="r1", mistakes=0.2, seed=3,
                                 limit=2)
    assert (pipeline_run.stage, pipeline_run.status, pipeline_run.total) == ("attempt", "queued", 2)
    assert pipeline_run.params["agent_name"] == "scripted (simulation)" and pipeline_run.params["seed"] == 3
    run_dir = settings.DATA_ROOT / "attempts" / "r1"
    assert [json.loads(x)["task_id"] for x in (run_dir / "tasks.jsonl").read_text().splitlines()] == \
        ["sb-shop-001", "sb-shop-002"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"agent": "gpt"}, "unknown agent 'gpt'"),
    ({"name": "../escape"}, "plain name"),
    ({"mistakes": 1.5}, "between 0 and 1"),
])
def test_attempt_start_refuses_bad_parameters(tasks_file, kwargs, message):
    with pytest.raises(AttemptError, match=message):
        attempt_start(**{"tasks_file": tasks_file, "agent": "scripted", "name": "ok", **kwargs})
    assert not PipelineRun.objects.exists()


def test_a_run_name_is_used_once(tasks_file):
    attempt_prepare(tasks_file=tasks_file, agent="scripted", name="twice")
    with pytest.raises(AttemptError, match="already exists"):
        attempt_prepare(tasks_file=tasks_file, agent="scripted", name="twice")


@pytest.mark.parametrize(("text", "message"), [
    ("", "holds no tasks"),
    ("{not json\n", "line 1 is not JSON"),
    ('{"task_id": "a/b", "site": "shop", "instruction": "x"}\n', "plain task_id"),
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


def test_a_cancelled_attempt_resumes_only_the_episodes_without_an_outcome(tasks_file, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    from taskgen.stages.attempt.service import OUTCOMES
    from taskgen.stages.attempt.tasks import attempt_episode_task, attempt_resume

    pipeline_run = attempt_prepare(tasks_file=tasks_file, agent="scripted", name="r-resume")
    run_dir = attempt_run_dir_of(pipeline_run)
    (run_dir / OUTCOMES / "sb-shop-001.json").write_text('{"task_id": "sb-shop-001"}')
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(status=PipelineRun.Status.CANCELLED)
    queued = []
    monkeypatch.setattr(attempt_episode_task, "delay", lambda run_id, task_id: queued.append((run_id, task_id)))
    with django_capture_on_commit_callbacks(execute=True):
        resumed = attempt_resume(pipeline_run=pipeline_run)
    assert resumed.pk == pipeline_run.pk and resumed.status == PipelineRun.Status.QUEUED
    assert queued == [(pipeline_run.pk, "sb-shop-002"), (pipeline_run.pk, "sb-shop-003")]


def test_an_attempt_still_running_is_not_resumed(tasks_file):
    from taskgen.stages.attempt.tasks import attempt_resume

    pipeline_run = attempt_prepare(tasks_file=tasks_file, agent="scripted", name="r-busy")
    with pytest.raises(AttemptError, match="only a failed or cancelled attempt"):
        attempt_resume(pipeline_run=pipeline_run)


def attempt_run_dir_of(pipeline_run):
    from pathlib import Path

    return Path(pipeline_run.params["run_dir"])
