"""Where a run is worked, how to start its worker and how to resume it are said in one set of words
(taskgen/engine/wait.py: where_words, worker_command, resume_words; wait_report says the resume), by every command.
Five commands had their own: the offline judge and proposer, worked in the command's own process, said to resume
without --workers (the resumed run then waited for a worker nobody had started), and the judge and the stall named
`celery -A taskgen worker`, which takes the default queue only, for the `judge` queue."""
from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.management import call_command

from taskgen.engine.stage_table import ENGINE_STAGES, stage_work
from taskgen.engine.wait import Waited, resume_words, wait_report, worker_command
from taskgen.models import PipelineRun
from tests import propose_helpers
from tests.factories import RunFactory
from tests.judge_helpers import shop_episode

ROOT = Path(__file__).resolve().parent.parent
sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures


def _taskgen(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    try:
        call_command("taskgen", *args, stdout=io.StringIO(), stderr=err)
        return 0, err.getvalue()
    except SystemExit as exit_info:
        return int(exit_info.code or 0), err.getvalue()


def _failing(monkeypatch, stage: str) -> None:
    def lost(*args, **kwargs):
        raise OSError("the disk went away")

    monkeypatch.setitem(ENGINE_STAGES, stage, replace(stage_work(stage), do=lost, max_attempts=1))


def test_no_command_words_the_resume_or_the_worker_itself():
    own = ROOT / "taskgen" / "engine" / "wait.py"
    copies = [f"{path.relative_to(ROOT)}:{n}" for folder in ("taskgen", "review")
              for path in (ROOT / folder).rglob("*.py") if path != own
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"taskgen resume \{|celery -A taskgen worker[\"')]", line)]
    assert not copies, f"resume or worker words of their own: {copies}"


@pytest.mark.django_db
def test_the_offline_judge_worked_here_is_resumed_here(monkeypatch, settings):
    settings.GEMINI_API_KEY, settings.JUDGE_PROVIDER = "", "rules"
    run = RunFactory(name="words-judge")
    shop_episode(run=run)
    _failing(monkeypatch, "judge")
    code, err = _taskgen("judge", run.name)
    pipeline_run = PipelineRun.objects.get(stage="judge")
    assert code == 1 and "here with 1 thread" in err
    assert err.rstrip().endswith(resume_words(pipeline_run=pipeline_run, work_here=1))
    assert err.rstrip().endswith(f"taskgen resume {pipeline_run.pk} --workers 1")


def test_the_offline_proposer_worked_here_is_resumed_here(sandbox_sites, monkeypatch):
    _failing(monkeypatch, "propose")
    code, err = _taskgen("propose", "--sites", "shop", "--per-site", "5", "--batch", "5")
    pipeline_run = PipelineRun.objects.get(stage="propose")
    assert code == 1 and err.rstrip().endswith(f"taskgen resume {pipeline_run.pk} --workers 1")


@pytest.mark.django_db
def test_a_stalled_run_names_a_worker_for_its_own_queue_and_how_to_resume_it():
    pipeline_run = PipelineRun.objects.create(stage="judge", status="running", total=1)
    pipeline_run.units.create(key="1", status="queued")
    stream = io.StringIO()
    assert wait_report(waited=Waited(pipeline_run, stalled=True), stream=stream) == 1
    said = stream.getvalue()
    assert f"is a worker running? {worker_command('judge')})" in said and "-Q judge" in said
    assert said.rstrip().endswith(f"taskgen resume {pipeline_run.pk}")  # no --workers: the workers were to work it
