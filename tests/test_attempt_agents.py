"""Choosing the agent of an attempt: the Pipeline page's attempt form and the CLI offer the scripted simulation and
every provider that can act, and hand a model agent's options (model, server URL, images) to the engine's params."""
from __future__ import annotations

import argparse
import json

import pytest
from django.urls import reverse

from review.forms_pipeline import AttemptForm
from sandbox.catalog import sandbox_tasks
from taskgen.harness.agents import (
    AgentError,
    agent_create,
    agent_label,
    agent_names,
    agent_options_check,
    agent_options_from,
)
from taskgen.harness.model_agent import ModelAgent
from taskgen.models import PipelineRun
from taskgen.providers import provider_names
from taskgen.stages.attempt import command as attempt_command

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr("taskgen.engine.control.dispatch_on_commit", lambda pk, n: calls.append((pk, n)))
    return calls


@pytest.fixture
def tasks_file(settings):
    path = settings.DATA_ROOT / "agent-tasks.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in sandbox_tasks()[:2]), encoding="utf-8")
    return path


def _post(client, tasks_file, **fields):
    form = {"tasks_file": str(tasks_file), "agent": "openai-compatible", "name": "qwen-run", "mistakes": "0.3",
            "seed": "0", **fields}
    return client.post(reverse("review:pipeline_start", args=["attempt"]), form)


def test_the_agents_are_the_simulation_the_rules_baseline_and_every_provider_that_acts():
    assert agent_names() == ("scripted", "rules", *provider_names("agent"))
    assert [name for name, _ in AttemptForm().fields["agent"].choices] == list(agent_names())
    parser = argparse.ArgumentParser()
    attempt_command.add_arguments(parser)
    assert tuple(next(a for a in parser._actions if a.dest == "agent").choices) == agent_names()


def test_an_admin_starts_an_openai_compatible_attempt_from_the_pipeline_page(admin_client_role, tasks_file, sent):
    response = _post(admin_client_role, tasks_file, model="qwen-test", base_url="http://127.0.0.1:8001/v1",
                     images="no")
    pipeline_run = PipelineRun.objects.get()
    assert response.status_code == 302 and response.url == pipeline_run.get_absolute_url()
    assert pipeline_run.params["agent"] == "openai-compatible" and pipeline_run.total == 2
    assert pipeline_run.params["agent_options"] == {"model": "qwen-test", "base_url": "http://127.0.0.1:8001/v1",
                                                    "images": False}
    assert sent and sent[0][0] == pipeline_run.pk


def test_a_model_agent_without_its_server_or_key_is_refused_on_the_form(admin_client_role, tasks_file, settings):
    settings.OPENAI_BASE_URL, settings.GEMINI_API_KEY = "", ""
    page = _post(admin_client_role, tasks_file).content.decode()
    assert "needs OPENAI_BASE_URL" in page and PipelineRun.objects.count() == 0
    page = _post(admin_client_role, tasks_file, agent="gemini").content.decode()
    assert "needs GEMINI_API_KEY" in page and PipelineRun.objects.count() == 0


def test_a_reviewer_cannot_start_an_attempt(reviewer_client, tasks_file):
    assert _post(reviewer_client, tasks_file, base_url="http://127.0.0.1:8001/v1").status_code == 403
    assert PipelineRun.objects.count() == 0


def test_the_form_and_the_cli_read_model_options_by_one_rule(settings, tasks_file):
    options = {"agent": "openai-compatible", "model": "qwen-test", "base_url": "http://127.0.0.1:9/v1",
               "images": "yes"}
    assert agent_options_from(options) == {"model": "qwen-test", "base_url": "http://127.0.0.1:9/v1",
                                                       "images": True}
    assert agent_options_from({"agent": "scripted", "model": "x"}) == {}


@pytest.mark.parametrize("options,error", [
    ({"temperature": 0.7}, "unknown option(s) temperature"),
    ({"base_url": "file:///etc/passwd"}, "http(s) URL"),
    ({"images": "maybe"}, "images is true"),
])
def test_bad_model_options_are_named(options, error, settings):
    settings.OPENAI_BASE_URL = "http://127.0.0.1:8001/v1"
    with pytest.raises(AgentError, match=error.replace("(", r"\(").replace(")", r"\)")):
        agent_options_check(name="openai-compatible", options=options)


def test_a_model_agent_is_made_with_its_options_and_named_by_its_model(settings):
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL, settings.AGENT_MODEL = "http://127.0.0.1:8001/v1", "qwen", ""
    agent = agent_create(name="openai-compatible", mistake_rate=0.3, seed=1, max_steps=7, model="qwen-big")
    assert isinstance(agent, ModelAgent) and agent.model == "qwen-big" and agent.max_steps == 7
    assert agent_label("openai-compatible", {}) == "openai-compatible qwen"
    assert "simulation" in agent_label("scripted")
