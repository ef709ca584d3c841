"""`manage.py taskgen validate`: the reference's line first, then the extra figures."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from taskgen.stats import REFERENCE_KEYS
from tests.factories import JudgeConfigFactory, RunFactory, SiteFactory
from tests.validate_data import make_cells, make_episode

pytestmark = pytest.mark.django_db


def _validate(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("taskgen", "validate", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().splitlines()


@pytest.fixture
def judged_run():
    run, site = RunFactory(name="human-train"), SiteFactory(slug="shop")
    gemini = JudgeConfigFactory(provider="gemini", model="gemini-3.5-flash", prompt_version="v1")
    make_cells(run=run, config=gemini, site=site, tp=3, fp=1, fn=1, tn=2)
    make_episode(run=run, site=site, truth=True, verdict="NONE", config=gemini)  # could not be judged: left out
    make_cells(run=run, config=JudgeConfigFactory(provider="rules", model="rules-v1"), site=site, tp=1)
    return run, gemini


def test_it_prints_the_reference_line_first_with_the_most_used_config(judged_run):
    run, _ = judged_run
    lines = _validate(run.name)
    first = json.loads(lines[0])
    assert list(first) == list(REFERENCE_KEYS)
    assert (first["episodes"], first["tp"], first["fp"], first["precision"]) == (7, 3, 1, 0.75)
    assert any("left out: 2 with a truth but no verdict (1 answered without" in line for line in lines)


def test_it_takes_a_config_key_or_id_and_prints_json(judged_run):
    run, gemini = judged_run
    by_key = _validate(run.name, "--judge", gemini.key, "--json")
    extra = json.loads(by_key[1])
    assert extra["figures"]["f1"] == 0.75 and extra["unjudged"] == 2  # one NONE, one judged by rules only
    assert [row["name"] for row in extra["per_site"]] == ["shop"]
    rules_line = json.loads(_validate(str(run.pk), "--judge", "rules:rules-v1:v1:default")[0])
    assert rules_line["episodes"] == 1


def test_it_explains_an_unknown_run_or_config(judged_run):
    run, _ = judged_run
    for args in (["no-such-run"], [run.name, "--judge", "gemini:nope:v1:default"]):
        err = io.StringIO()
        with pytest.raises(SystemExit) as stopped:
            call_command("taskgen", "validate", *args, stdout=io.StringIO(), stderr=err)
        assert stopped.value.code == 2 and "no " in err.getvalue()


def test_json_against_humans_has_the_reviewer_pairs_and_the_pooled_figure(judged_run):
    from taskgen.models import Label
    from tests.factories import UserFactory

    run, gemini = judged_run
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    for episode in run.episodes.all()[:3]:
        Label.objects.create(episode=episode, reviewer=ann, verdict="SUCCESS")
        Label.objects.create(episode=episode, reviewer=bob, verdict="SUCCESS")
    extra = json.loads(_validate(run.name, "--against", "human", "--judge", gemini.key, "--json")[1])
    [pair] = extra["reviewer_agreement"]
    assert (pair["a"], pair["b"], pair["episodes"]) == ("ann", "bob", 3)
    assert extra["human_agreement"]["with_unsure"]["pairs"] == 3
    assert extra["human_agreement"]["with_unsure"]["agreement"] == 1.0
