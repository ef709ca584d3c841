"""The user's own harness: an admin-configured command (never a page field) run without a shell, in the data root,
with a time limit, on the attempt's tasks; its output shown on the run's page; stopped on cancel; its run dir
imported on exit 0; a non-zero exit fails the run with its last lines. The harness is a small script of our own."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from review.forms_pipeline import AttemptForm
from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_cancel, run_start
from taskgen.engine.wait import run_wait
from taskgen.engine.worker import work
from taskgen.harness.external import (
    ExternalHarness,
    external_command,
    external_harnesses,
    external_harnesses_parse,
    external_run,
)
from taskgen.models import PipelineRun, Run

SCRIPT = Path(__file__).parent / "fakes" / "harness_script.py"
COMMAND = f"{sys.executable} {SCRIPT} --tasks {{tasks}} --arm {{arm}} --out {{run_dir}}"


@pytest.fixture
def harness(settings):
    settings.EXTERNAL_HARNESSES_JSON = json.dumps({"mini": COMMAND,
                                                   "quick": {"command": COMMAND, "timeout_seconds": 2}})
    settings.EXTERNAL_HARNESS_SECONDS = 60
    return external_harnesses()


@pytest.fixture
def tasks_file(settings):
    path = settings.DATA_ROOT / "ext-tasks.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in sandbox_tasks()[:3]), encoding="utf-8")
    return path


def _start(tasks_file, name: str, arm: str = "base", harness_name: str = "mini") -> PipelineRun:
    return run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": f"external:{harness_name}",
                                              "name": name, "agent_options": {"arm": arm}})


def _run(tasks_file, name: str, **kwargs) -> PipelineRun:
    pipeline_run = _start(tasks_file, name, **kwargs)
    run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, stall_seconds=120)
    pipeline_run.refresh_from_db()
    return pipeline_run


@pytest.mark.parametrize("text,error", [
    ("not json", "not JSON"),
    ('["a"]', "JSON object"),
    ('{"x y": "run {tasks} {run_dir}"}', "harness name"),
    ('{"h": "run {tasks} {run_dir} {secret}"}', "unknown placeholder(s) secret"),
    ('{"h": "run {tasks}"}', "must take {tasks} and {run_dir}"),
    ('{"h": {"command": "run {tasks} {run_dir}", "timeout_seconds": 0}}', "timeout_seconds"),
    ('{"h": "run \'{tasks} {run_dir}"}', "No closing quotation"),
])
def test_a_bad_harness_configuration_is_refused_with_the_reason(text, error):
    with pytest.raises(ValueError, match=error.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")):
        external_harnesses_parse(text, default_timeout=60)


def test_the_app_refuses_to_start_with_a_bad_harness_configuration():
    env = {**os.environ, "TASKGEN_EXTERNAL_HARNESSES": '{"h": "run {tasks}"}', "DJANGO_SETTINGS_MODULE":
           "taskgen.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "TASKGEN_EXTERNAL_HARNESSES" in done.stderr


def test_the_command_is_split_before_it_is_filled_so_no_value_becomes_two_arguments_or_a_shell_line(tmp_path):
    harness = ExternalHarness("h", "eval --tasks {tasks} --out={run_dir} --arm {arm}", 60)
    odd = tmp_path / "my tasks; rm -rf ~ $(id).jsonl"
    assert external_command(harness, tasks=odd, run_dir=tmp_path / "run dir", arm="base") == [
        "eval", "--tasks", str(odd), f"--out={tmp_path / 'run dir'}", "--arm", "base"]


@pytest.mark.django_db(transaction=True)
def test_a_harness_that_exits_0_has_its_run_dir_imported(harness, tasks_file, settings, admin_client_role):
    pipeline_run = _run(tasks_file, "ext-ok")
    assert pipeline_run.status == PipelineRun.Status.DONE and pipeline_run.total == 1, pipeline_run.errors
    run = Run.objects.get(name="ext-ok")
    assert run.agent == "external harness mini (arm base)" and pipeline_run.run_id == run.pk
    assert run.episodes.count() == 3 and all(e.has_rows and e.steps == 3 for e in run.episodes.all())
    assert sorted(run.episodes.values_list("verifier_result__ok", flat=True)) == [False, True, True]
    assert pipeline_run.result["output_lines"] == 2 and pipeline_run.result["output_tail"][-1] == "harness: done"
    page = admin_client_role.get(pipeline_run.get_absolute_url()).content.decode()
    assert "harness: done" in page and "The harness's output: the last 2 of 2 lines" in page
    log = settings.DATA_ROOT / "attempts" / "ext-ok" / "harness_output.log"
    assert log.read_text().startswith("harness: base on tasks.jsonl")


@pytest.mark.django_db(transaction=True)
def test_a_non_zero_exit_fails_the_run_with_its_last_lines(harness, tasks_file, admin_client_role):
    pipeline_run = _run(tasks_file, "ext-fail", arm="fail")
    assert pipeline_run.status == PipelineRun.Status.FAILED and not Run.objects.filter(name="ext-fail").exists()
    unit = pipeline_run.units.get()
    assert (unit.status, unit.attempts) == ("failed", 1)  # failed for good at once: a resume runs it again
    error = pipeline_run.errors[0]
    assert f"taskgen resume {pipeline_run.pk}" in pipeline_run.errors[-1]
    assert "the harness mini exited with code 3; its last lines:" in error
    assert "the model server refused the connection" in error and "episode 29: <b>error</b> line" in error
    assert "episode 10:" not in error  # the last 20 lines, not all of them
    page = admin_client_role.get(pipeline_run.get_absolute_url()).content.decode()
    assert "episode 29: &lt;b&gt;error&lt;/b&gt; line" in page and "<b>error</b>" not in page


@pytest.mark.django_db(transaction=True)
def test_a_harness_that_exits_0_with_an_empty_folder_fails_its_run_and_resume_runs_it_again(harness, tasks_file,
                                                                                           settings):
    pipeline_run = _run(tasks_file, "ext-empty", arm="second")
    assert pipeline_run.status == PipelineRun.Status.FAILED and pipeline_run.failed == 1, pipeline_run.errors
    error = pipeline_run.errors[0]
    assert "the harness mini exited 0, but 3 of the 3 episodes it was given are missing" in error
    assert "sb-shop-001 (no episode folder)" in error
    assert pipeline_run.units.get().status == "failed"  # not done: there is something to resume

    err = io.StringIO()
    call_command("taskgen", "resume", str(pipeline_run.pk), "--workers", "1", stdout=io.StringIO(), stderr=err)
    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.failed) == (PipelineRun.Status.DONE, 0), err.getvalue()
    log = (settings.DATA_ROOT / "attempts" / "ext-empty" / "harness_output.log").read_text()
    assert log.count("harness: second on tasks.jsonl") == 2  # the harness ran again
    assert Run.objects.get(name="ext-empty").episodes.count() == 3 and pipeline_run.result["episodes"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_harness_that_exits_0_leaving_a_broken_folder_fails_its_run_naming_each_episode(harness, tasks_file):
    pipeline_run = _run(tasks_file, "ext-broken", arm="broken")
    assert pipeline_run.status == PipelineRun.Status.FAILED, pipeline_run.errors
    error = pipeline_run.errors[0]
    tasks = [json.loads(line)["task_id"] for line in tasks_file.read_text().splitlines()]
    assert "2 of the 3 episodes it was given are missing or could not be imported" in error
    assert f"{tasks[0]} (grade_inputs.json: episode not imported:" in error
    assert f"{tasks[-1]} (no episode folder)" in error
    assert Run.objects.get(name="ext-broken").episodes.count() == 1  # what did import is kept


@pytest.mark.django_db(transaction=True)
def test_the_command_line_says_what_an_external_run_did(harness, tasks_file):
    out = io.StringIO()
    call_command("taskgen", "attempt", "--tasks", str(tasks_file), "--agent", "external:mini", "--name", "ext-cli",
                 "--inline", stdout=out, stderr=io.StringIO())  # exit 0: no SystemExit
    line = out.getvalue().strip().splitlines()[-1]
    assert "None" not in out.getvalue()
    assert line.startswith("run 'ext-cli' (id ") and line.endswith(": 3 episodes (0 failed to run); the verifier "
                                                                   "passed 2 of the 3 it checked")


@pytest.mark.django_db(transaction=True)
def test_a_harness_past_its_time_limit_is_stopped_and_fails_the_run(harness, tasks_file):
    pipeline_run = _run(tasks_file, "ext-slow", arm="slow", harness_name="quick")
    assert pipeline_run.status == PipelineRun.Status.FAILED
    assert "was stopped at its time limit (2 s)" in pipeline_run.errors[0] and "working" in pipeline_run.errors[0]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_run_stops_the_harness_and_its_children(harness, tasks_file, settings):
    pipeline_run = _start(tasks_file, "ext-cancel", arm="slow")
    def worker_thread() -> None:
        try:
            work(pipeline_run_id=pipeline_run.pk, owner="test-worker")
        finally:
            connection.close()  # a thread's own connection: left open, it holds the test database at teardown

    worker = threading.Thread(target=worker_thread)
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pipeline_run.refresh_from_db()
        if pipeline_run.result.get("output_lines", 0) >= 5:
            break
        time.sleep(0.2)
    assert pipeline_run.result["output_tail"][-1].startswith("working")  # the output shows while it runs
    assert run_cancel(pipeline_run=pipeline_run)
    worker.join(timeout=60)
    assert not worker.is_alive()
    pids = [int(p) for p in (settings.DATA_ROOT / "attempts" / "ext-cancel" / "pids.txt").read_text().split()]
    assert all(_gone(pid) for pid in pids)
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == PipelineRun.Status.CANCELLED and pipeline_run.result["output_lines"] < 600
    assert "cancelled" in pipeline_run.units.get().last_error


@pytest.mark.django_db(transaction=True)
def test_a_harness_that_prints_a_lot_is_read_to_the_end_and_imported(harness, tasks_file, settings):
    pipeline_run = _run(tasks_file, "ext-loud", arm="loud")
    assert pipeline_run.status == PipelineRun.Status.DONE, pipeline_run.errors
    assert pipeline_run.result["output_lines"] == 200_002
    assert pipeline_run.result["output_tail"][-1] == "harness: done" and len(pipeline_run.result["output_tail"]) <= 40
    log = settings.DATA_ROOT / "attempts" / "ext-loud" / "harness_output.log"
    assert log.stat().st_size > 7_000_000


def test_a_harness_that_cannot_start_says_why(tmp_path):
    outcome = external_run(harness=ExternalHarness("h", "x {tasks} {run_dir}", 5), args=["/no/such/harness"],
                           cwd=tmp_path, log_path=tmp_path / "log", on_output=lambda *a: None,
                           should_stop=lambda: False)
    assert outcome.exit_code == 127 and "could not start '/no/such/harness'" in outcome.tail[0]


@pytest.mark.django_db
def test_the_attempt_form_offers_configured_harnesses_but_never_their_command(harness, admin_client_role, tasks_file,
                                                                              monkeypatch):
    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: None)
    choices = dict(AttemptForm().fields["agent"].choices)
    assert "external:mini" in choices and "external:quick" in choices
    assert not {"command", "template", "harness_command"} & set(AttemptForm().fields)
    response = admin_client_role.post(reverse("review:pipeline_start", args=["attempt"]), {
        "tasks_file": str(tasks_file), "agent": "external:mini", "name": "ext-form", "mistakes": "0.3", "seed": "0",
        "arm": "sft", "command": "rm -rf /"})
    pipeline_run = PipelineRun.objects.get()
    assert response.status_code == 302 and pipeline_run.params["agent_options"] == {"arm": "sft"}
    assert "command" not in pipeline_run.params
