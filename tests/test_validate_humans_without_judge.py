"""Issue 22, seen 3: the agreement between humans needs no judge, so the JSON and CSV downloads and `taskgen validate
RUN --against human --json` give it for a run nobody has judged (they answered 400 and exited 2)."""
from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.factories import RunFactory, SiteFactory, UserFactory
from tests.validate_data import label, make_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def labelled_only():
    """Three episodes labelled by ann and bob (they agree on two), no judgment anywhere."""
    run, site = RunFactory(name="labelled-only"), SiteFactory(slug="shop")
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    for a, b in [("SUCCESS", "SUCCESS"), ("NOT SUCCESS", "NOT SUCCESS"), ("SUCCESS", "NOT SUCCESS")]:
        episode = make_episode(run=run, site=site)
        label(episode, ann, a)
        label(episode, bob, b)
    return run


def test_the_json_download_gives_the_humans_agreement_without_a_judge(viewer_client, labelled_only):
    response = viewer_client.get(reverse("review:validate_json"), {"runs": [labelled_only.pk], "against": "human"})
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    body = json.loads(response.content)
    assert body["judge"] is None and body["reference"] is None and "judge run" in body["note"]
    assert (body["human_agreement"]["without_unsure"]["pairs"], body["human_agreement"]["without_unsure"]["agree"]) \
        == (3, 2)
    [pair] = body["reviewer_agreement"]
    assert (pair["a"], pair["b"], pair["episodes"], pair["agree"]) == ("ann", "bob", 3, 2)
    assert body["judge_vs_reviewers"] == []


def test_the_csv_download_gives_the_humans_agreement_without_a_judge(viewer_client, labelled_only):
    response = viewer_client.get(reverse("review:validate_csv"), {"runs": [labelled_only.pk]})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["scope"], r["name"]) for r in rows] == [("humans_pooled", "with_unsure"),
                                                       ("humans_pooled", "without_unsure"),
                                                       ("reviewer_pair", "ann vs bob")]
    pooled = rows[1]
    assert (pooled["episodes"], pooled["agreement"]) == ("3", "0.667") and pooled["agreement_low"]
    assert pooled["precision"] == "" and pooled["tp"] == ""


def test_the_false_positive_list_still_needs_a_judge(viewer_client, labelled_only):
    response = viewer_client.get(reverse("review:validate_false_positives"), {"runs": [labelled_only.pk]})
    assert response.status_code == 400 and b"choose runs that have judgments" in response.content


def test_the_page_links_the_downloads_without_a_judge(viewer_client, labelled_only):
    page = viewer_client.get(reverse("review:validate"), {"runs": [labelled_only.pk]}).content.decode()
    assert "agreement (JSON)" in page and reverse("review:validate_csv") in page


def test_the_command_prints_the_humans_agreement_of_a_run_nobody_judged(labelled_only):
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "validate", labelled_only.name, "--against", "human", "--json", stdout=out, stderr=err)
    [line] = out.getvalue().splitlines()
    body = json.loads(line)
    assert body["judge"] is None and body["runs"] == ["labelled-only"]
    assert body["human_agreement"]["without_unsure"]["agree"] == 2 and len(body["reviewer_agreement"]) == 1
    assert "no judgments yet" in err.getvalue() and "taskgen judge labelled-only" in err.getvalue()
    text = io.StringIO()
    call_command("taskgen", "validate", labelled_only.name, "--against", "human", stdout=text, stderr=io.StringIO())
    assert "ann vs bob: 3 episodes, agreement 0.667" in text.getvalue()


def test_the_command_still_refuses_a_judge_config_that_does_not_exist(labelled_only):
    err = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("taskgen", "validate", labelled_only.name, "--judge", "gemini:nope:v1:default",
                     stdout=io.StringIO(), stderr=err)
    assert stopped.value.code == 2 and "no judge config" in err.getvalue()
