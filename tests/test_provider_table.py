"""One provider table (taskgen/providers/__init__.py, PROVIDERS): what each provider can do - judge, propose, act as
an agent, a batch API, read screenshots, Gemini's media resolution, JSON mode, a server per run, offline - is asked
by every form, command and stage, so a provider described differently changes what they offer and refuse."""
from __future__ import annotations

import argparse
import io
from dataclasses import replace

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

import taskgen.providers as providers
from review.forms_pipeline import AttemptForm, JudgeForm, ProposeForm
from taskgen.engine.contract import StageParamsError
from taskgen.models import JudgeConfig, PipelineRun, ProposalBatch
from taskgen.providers import ProviderInfo, provider_can, provider_check, provider_names
from taskgen.stages.judge import command as judge_command
from taskgen.stages.judge.images import image_copies_wanted
from taskgen.stages.judge.service import RULES_MODEL
from taskgen.stages.judge.work import judge_params_check
from taskgen.stages.propose import command as propose_command
from tests.factories import EpisodeFactory, RunFactory

PLANTED = ProviderInfo("planted", frozenset({"judge", "batch", "offline"}), "planted (a test's own baseline)",
                       make="taskgen.providers.rules:RulesProvider")


@pytest.fixture
def planted(monkeypatch):
    """The table with Gemini's batch API taken away and an offline judge that has one added."""
    table = tuple(replace(p, can=p.can - {"batch"}) for p in providers.PROVIDERS) + (PLANTED,)
    monkeypatch.setattr(providers, "PROVIDERS", table)
    return table


def _option(add_arguments, dest: str) -> argparse.Action:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return next(a for a in parser._actions if a.dest == dest)


def test_the_table_says_what_each_provider_can_do():
    assert provider_names("batch") == ("gemini",)
    assert provider_names("media_resolution") == ("gemini",)
    assert provider_names("offline") == ("rules",)
    assert provider_names("server_url") == ("openai-compatible",)
    assert set(provider_names("images")) == set(provider_names("json_mode")) == {"gemini", "openai-compatible"}
    assert not provider_can("no-such-provider", "judge")
    with pytest.raises(ValueError, match="provider 'rules' cannot judge a run through a batch API: use one of gemini"):
        provider_check("rules", "batch")
    with pytest.raises(ValueError, match="unknown role or ability 'painter'"):
        provider_names("painter")


def test_a_planted_provider_changes_what_the_judge_form_and_command_offer(planted):
    form = JudgeForm()
    assert [name for name, _ in form.fields["provider"].choices] == ["rules", "gemini", "openai-compatible", "planted"]
    assert form.fields["batch"].help_text.endswith("batch API (cheaper, slower): planted.")
    assert "planted is an offline baseline" in form.fields["provider"].help_text
    assert "planted" in _option(judge_command.add_arguments, "provider").choices
    assert _option(judge_command.add_arguments, "batch").help.endswith("batch API: planted")


def test_without_a_provider_that_has_a_batch_api_the_form_offers_no_batch(monkeypatch):
    monkeypatch.setattr(providers, "PROVIDERS", tuple(replace(p, can=p.can - {"batch"}) for p in providers.PROVIDERS))
    assert "batch" not in JudgeForm().fields and "batch" in JudgeForm.base_fields


@pytest.mark.django_db
def test_the_judge_stage_asks_the_table_for_batch_the_baseline_s_one_model_and_images(planted, settings):
    settings.GEMINI_API_KEY = "test-key-not-real"
    run = RunFactory()
    with pytest.raises(StageParamsError, match="provider 'gemini' cannot judge a run through a batch API: use one "
                                               "of planted, or judge without batch"):
        judge_params_check({"run": run.pk, "provider": "gemini", "batch": True})
    params = judge_params_check({"run": run.pk, "provider": "planted", "model": "typed", "image_policy": "full",
                                 "batch": True})
    config = JudgeConfig.objects.get(pk=params.config_id)
    assert params.batch and (config.provider, config.model, config.image_policy) == ("planted", RULES_MODEL, "none")
    assert config.is_offline_baseline


@pytest.mark.django_db
def test_the_command_line_refuses_a_batch_without_a_batch_api_exactly_as_the_form_does(admin_client_role, settings):
    """The command line used to check batch itself and start the run past the stage's check."""
    settings.GEMINI_API_KEY = ""
    run = RunFactory(name="batch-refused")
    EpisodeFactory(run=run)
    page = admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), {
        "run": run.pk, "provider": "rules", "prompt_version": "judge-v1", "batch": "on"}).content.decode()
    err = io.StringIO()
    with pytest.raises((CommandError, SystemExit)):
        call_command("taskgen", "judge", run.name, "--provider", "rules", "--batch", stdout=io.StringIO(), stderr=err)
    words = "provider 'rules' cannot judge a run through a batch API: use one of gemini, or judge without batch"
    assert words.replace("'", "&#x27;") in page  # the form's error, escaped on the page
    assert f"judge: {words}" in err.getvalue()
    assert PipelineRun.objects.count() == 0


def test_the_propose_form_and_command_start_with_the_table_s_offline_proposer(monkeypatch):
    table = tuple(replace(p, can=p.can - {"offline"}) for p in providers.PROVIDERS) + (
        replace(PLANTED, can=frozenset({"propose", "offline"})),)
    monkeypatch.setattr(providers, "PROVIDERS", table)
    assert ProposeForm().fields["provider"].initial() == "planted"
    assert _option(propose_command.add_arguments, "provider").default == "planted"
    assert ProposalBatch(provider="planted").is_offline_baseline
    assert not ProposalBatch(provider="rules").is_offline_baseline


@pytest.mark.parametrize("judge,copies", [("openai-compatible", ("small",)), ("gemini", ()), ("rules", ())])
def test_screenshot_copies_are_made_for_a_judge_that_reads_images_without_media_resolution(settings, judge, copies):
    settings.JUDGE_IMAGE_COPIES, settings.JUDGE_PROVIDER = None, judge
    assert image_copies_wanted() == copies
    settings.JUDGE_IMAGE_COPIES = ("default",)  # a setting given wins
    assert image_copies_wanted() == ("default",)


@pytest.mark.django_db
def test_a_planted_agent_provider_changes_what_the_attempt_form_says(monkeypatch):
    server = ProviderInfo("planted-server", frozenset({"agent", "server_url"}), "planted", needs="PLANTED_URL",
                          make="taskgen.providers.openai_compatible:OpenAICompatibleProvider")
    monkeypatch.setattr(providers, "PROVIDERS", (*providers.PROVIDERS, server))
    form = AttemptForm()
    assert form.fields["base_url"].label == "Server URL (openai-compatible, planted-server)"
    assert "gemini GEMINI_API_KEY, openai-compatible OPENAI_BASE_URL (or the URL below), planted-server PLANTED_URL " \
           "(or the URL below)." in form.fields["agent"].help_text
