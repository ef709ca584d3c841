"""The demo's setup commands: a login printed once, every run judged offline once."""
from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from taskgen.models import Judgment, PipelineRun
from tests.factories import EpisodeFactory, RunFactory

pytestmark = pytest.mark.django_db


def _call(*args: str) -> str:
    out = StringIO()
    call_command("taskgen", *args, stdout=out)
    return out.getvalue()


def test_demo_setup_prints_a_login_once():
    first = _call("demo-setup")
    assert "password:" in first and get_user_model().objects.get(username="admin").is_superuser
    assert "already exists" in _call("demo-setup")


def test_demo_judge_judges_every_run_once_with_the_rules_baseline():
    run = RunFactory(name="demo-run")
    EpisodeFactory.create_batch(3, run=run)
    assert '"episodes": 3' in _call("demo-judge")
    assert set(Judgment.objects.values_list("config__provider", flat=True)) == {"rules"}
    _call("demo-judge")
    assert Judgment.objects.count() == 3
    assert PipelineRun.objects.filter(stage="judge").count() == 1  # nothing left to judge: no empty run


def test_demo_judge_says_when_there_is_nothing_to_judge():
    assert "no runs" in _call("demo-judge")


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
