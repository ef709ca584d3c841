"""The demo's setup commands: a login printed once, every run judged offline once."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from taskgen.models import Judgment, PipelineRun
from tests.factories import EpisodeFactory, RunFactory
from tests.rundirs import build_run

pytestmark = pytest.mark.django_db


def _call(*args: str) -> str:
    out = StringIO()
    call_command("taskgen", *args, stdout=out)
    return out.getvalue()


def test_demo_setup_prints_a_login_once():
    first = _call("demo-setup")
    assert "password:" in first and get_user_model().objects.get(username="admin").is_superuser
    assert "already exists" in _call("demo-setup")


def test_demo_judge_judges_the_demo_runs_once_with_the_rules_baseline():
    EpisodeFactory.create_batch(3, run=RunFactory(name="sandbox-demo"))
    EpisodeFactory.create_batch(2, run=RunFactory(name="someone-elses"))
    assert '"episodes": 3' in _call("demo-judge")
    assert set(Judgment.objects.values_list("config__provider", flat=True)) == {"rules"}
    assert not Judgment.objects.filter(episode__run__name="someone-elses").exists()
    assert "judged before" in _call("demo-judge")
    assert Judgment.objects.count() == 3
    assert PipelineRun.objects.filter(stage="judge").count() == 1  # judged once: no second, empty run


def test_demo_judge_says_when_there_is_nothing_to_judge():
    RunFactory(name="not-a-demo-run")
    assert "no demo runs" in _call("demo-judge")


def test_the_demo_login_is_said_again_until_its_password_changes(settings, tmp_path):
    from taskgen.demo import demo_login_words

    settings.VAR_DIR = tmp_path
    password = _call("demo-setup").split("password: ")[1].split()[0]
    assert demo_login_words() == f"log in as admin / {password}"
    assert oct((tmp_path / "demo-login.json").stat().st_mode)[-3:] == "600"
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed-by-the-admin")
    admin.save()
    assert demo_login_words() == "log in as admin (its password was changed since it was made)"


def _database() -> str:
    """Every row the app keeps, as JSON (what a second `make demo` must leave as it is)."""
    out = StringIO()
    call_command("dumpdata", "--exclude", "sessions", "--exclude", "contenttypes", "--exclude", "auth.permission",
                 stdout=out)
    return out.getvalue()


def _demo_set_up(data: Path) -> None:
    """The set-up steps of `make demo` (Makefile: demo-data), in its order."""
    for step in (["demo-setup"], ["sandbox-sitemap"], ["demo-data", "--data", str(data)], ["demo-attempt"],
                 ["demo-judge"]):
        _call(*step)


@pytest.mark.django_db(transaction=True)
def test_a_second_demo_set_up_changes_nothing(tmp_path, settings):
    """The first set-up judges the demo's own runs; runs a user imported since (one left unjudged on purpose, one
    that came with its own judge files) are theirs: the second set-up only finds everything there."""
    settings.VAR_DIR = tmp_path / "var"
    (tmp_path / "var").mkdir()
    demo = EpisodeFactory.create_batch(2, run=RunFactory(name="sandbox-demo"))  # what demo-attempt made
    om2w = tmp_path / "om2w"
    build_run(om2w, ["om2w-a", "om2w-b"], tasks_beside=True)
    _demo_set_up(om2w)
    judged = Judgment.objects.filter(config__provider="rules")
    assert judged.filter(episode__run__name="sandbox-demo").count() == len(demo)
    assert judged.filter(episode__run__name="online-mind2web-abp").count() == 2

    mine = build_run(tmp_path / "mine", ["shop-a", "shop-b"])
    _call("import", str(mine), "--name", "left-unjudged")
    theirs = build_run(tmp_path / "theirs", ["shop-c"])
    (theirs.parent / "run_judge").mkdir()
    (theirs.parent / "run_judge" / "shop-c.json").write_text(json.dumps(
        {"task_id": "shop-c", "predicted_label": 1, "verdict": True, "response": "{}", "model": "gemini-x"}))
    _call("import", str(theirs), "--name", "came-judged")
    before = _database()
    _demo_set_up(om2w)
    assert _database() == before
    assert not Judgment.objects.filter(episode__run__name="left-unjudged").exists()
    assert set(Judgment.objects.filter(episode__run__name="came-judged").values_list("config__provider", flat=True)) \
        == {"gemini"}
