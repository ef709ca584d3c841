"""The one provider list: which providers exist and which roles each serves, asked by settings, judge, forms, CLI."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from review.forms_pipeline import JudgeForm
from taskgen.providers import provider_check, provider_choices, provider_for, provider_missing, provider_names
from taskgen.stages.judge import command as judge_command
from taskgen.stages.judge.service import JudgeError, judge_config_for


def test_every_provider_listed_serves_a_known_role_and_can_be_made():
    for name in provider_names():
        assert provider_for(name).name == name


def test_model_providers_serve_every_role_and_the_baseline_never_acts():
    assert provider_names("agent") == ("gemini", "openai-compatible")
    assert set(provider_names("propose")) == {"rules", "gemini", "openai-compatible"}


def test_rules_never_acts_as_an_agent():
    assert "rules" in provider_names("judge")
    assert "rules" not in provider_names("agent")
    with pytest.raises(ValueError, match="cannot attempt tasks as an agent"):
        provider_check("rules", "agent")


def test_an_unknown_provider_or_role_is_named_in_the_error():
    with pytest.raises(ValueError, match="unknown provider 'openai'"):
        provider_for("openai")
    with pytest.raises(ValueError, match="unknown role"):
        provider_names("painter")


def test_the_judge_form_and_the_cli_offer_exactly_the_judging_providers():
    assert [name for name, _ in JudgeForm().fields["provider"].choices] == list(provider_names("judge"))
    assert [name for name, _ in provider_choices("judge")] == list(provider_names("judge"))
    import argparse

    parser = argparse.ArgumentParser()
    judge_command.add_arguments(parser)
    provider_action = next(a for a in parser._actions if a.dest == "provider")
    assert tuple(provider_action.choices) == provider_names("judge")


def test_the_judge_config_check_refuses_a_provider_missing_its_key_or_server(db, settings):
    settings.GEMINI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    assert "GEMINI_API_KEY" in provider_missing("gemini")
    with pytest.raises(JudgeError, match="needs GEMINI_API_KEY"):
        judge_config_for("gemini")
    with pytest.raises(JudgeError, match="needs OPENAI_BASE_URL"):
        judge_config_for("openai-compatible")
    with pytest.raises(JudgeError, match="unknown provider"):
        judge_config_for("openai")


def test_settings_refuse_a_judge_provider_not_in_the_list_at_start():
    env = {**os.environ, "TASKGEN_JUDGE_PROVIDER": "openai", "DJANGO_SETTINGS_MODULE": "taskgen.settings"}
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "TASKGEN_JUDGE_PROVIDER" in done.stderr and "unknown provider 'openai'" in done.stderr
