"""The plain-name rule (taskgen/names.py) is the one every place that turns a name into a folder, a file or a
harness argument asks: a name that drifted between the copies (`_run` and a 180-character name passed the attempt
but the approved-tasks file refused them; an arm could start with `-`) is now taken or refused alike by the attempt,
the approved-tasks file, the import, the export, the judge dir and an external harness's name and arm."""
from __future__ import annotations

import json
from io import StringIO

import pytest

from taskgen.harness.agents import AgentError, agent_options_check
from taskgen.harness.external import external_harnesses_parse
from taskgen.models import Episode, Task
from taskgen.names import NotPlainName, is_plain_name, plain_name_check
from taskgen.stages.attempt.service import AttemptError, attempt_start_check, attempt_tasks_read
from taskgen.stages.export.output import safe_name
from taskgen.stages.export.select import ExportError
from taskgen.stages.import_.service import import_run_dir
from taskgen.stages.judge.command import _write_dir
from taskgen.stages.propose.tasks_file import reviewed_tasks_file_write
from tests.factories import JudgmentFactory, RunFactory, SiteFactory, TaskFactory
from tests.rundirs import task_line, write_episode, write_tasks

pytestmark = pytest.mark.django_db

PLAIN = ["ok", "a" * 180, "a" * 200, "tg-shop.1_x", "9lives"]
NOT_PLAIN = ["_run", "a" * 201, "-rf", ".hidden", "..", "a/b", "a\\b", "é", "with space", "", "a\x00b",
             "_report.json"]


def _refuses(check) -> bool:
    """Whether the check refused its name, with a message that says it is not plain."""
    try:
        check()
    except (AttemptError, ExportError, AgentError, ValueError) as exc:
        assert "not a plain name" in str(exc) or "not a safe file name" in str(exc), str(exc)
        return True
    return False


@pytest.fixture
def approved_site():
    task = TaskFactory(site=SiteFactory(slug="shop"), review_state=Task.ReviewState.APPROVED)
    return task.site.slug


def _import_refuses(tmp_path, task_id: str) -> bool:
    run_dir = tmp_path / "import" / "run"
    run_dir.mkdir(parents=True)
    write_episode(run_dir, task_id)
    write_tasks(run_dir / "tasks.jsonl", [task_line(task_id)])
    summary = import_run_dir(run_dir=run_dir, name=f"import-{len(task_id)}")
    imported = Episode.objects.filter(task__task_id=task_id).exists()
    skipped = [s.reason for s in summary.skipped if "not a plain" in s.reason]
    assert imported != bool(skipped), (imported, summary.skipped)
    return not imported


@pytest.mark.parametrize("name", PLAIN + NOT_PLAIN)
def test_every_place_takes_or_refuses_a_name_alike(name, tmp_path, settings, approved_site):
    settings.EXTERNAL_HARNESSES_JSON = json.dumps({"mini": "true {tasks} {run_dir} {arm}"})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": name, "site": "shop", "instruction": "Find the mug"}) + "\n")
    refusals = {
        "the rule": not is_plain_name(name),
        "attempt's run name": _refuses(lambda: attempt_start_check(agent="scripted", name=name, mistakes=0)),
        "attempt's task id": _refuses(lambda: attempt_tasks_read(tasks_file=tasks)),
        "approved-tasks file": _refuses(lambda: reviewed_tasks_file_write(sites=[approved_site], include_all=False,
                                                                           name=name)),
        "export folder": _refuses(lambda: safe_name(name)),
        "harness arm": _refuses(lambda: agent_options_check(name="external:mini", options={"arm": name})),
        "harness name": _refuses(lambda: external_harnesses_parse(json.dumps({name: "true {tasks} {run_dir}"}),
                                                                   default_timeout=10)),
    }
    if "\x00" not in name and "/" not in name and name not in ("", ".", ".."):  # a folder of that name can exist
        refusals["import"] = _import_refuses(tmp_path, name)
    assert set(refusals.values()) == {name in NOT_PLAIN}, refusals


def test_the_judge_dir_skips_a_task_id_that_is_not_plain(tmp_path):
    run = RunFactory()
    for task_id in ("ok-1", "_report"):  # a task id made before the rule, kept in the database
        JudgmentFactory(episode__run=run, episode__task=TaskFactory(task_id=task_id), verdict="SUCCESS")
    err = StringIO()
    written = _write_dir(run, JudgmentFactory._meta.model.objects.first().config, tmp_path / "judged", err)
    assert written == 1 and [p.name for p in (tmp_path / "judged").iterdir()] == ["ok-1.json"]
    assert "'_report': not a plain name" in err.getvalue()


def test_the_refusal_names_the_value_cut_and_states_the_rule():
    with pytest.raises(NotPlainName) as refused:
        plain_name_check("x" * 300 + "/", what="the run name")
    message = str(refused.value)
    assert message.startswith(f"the run name {'x' * 80!r} is not a plain name (letters, digits")
    assert "a letter or digit first" in message and "200 characters" in message
