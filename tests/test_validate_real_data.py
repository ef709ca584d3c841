"""Validate over the real Online-Mind2Web tasks (116 real websites, text no one here wrote), with human labels as
the truth since a live-web run has no verifiers."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from django.urls import reverse

from taskgen.models import Episode, FinalLabel, Judgment, Site, Task
from taskgen.stages.validate.service import validate_compute
from tests.factories import JudgeConfigFactory, RunFactory
from tests.validate_data import reference_validate

DATA = Path("/work/shared/data/online-mind2web-abp")
pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(not (DATA / "tasks.jsonl").exists(), reason="the Online-Mind2Web data is not here")]


@pytest.fixture
def mind2web():
    """Its 300 distinct tasks as one run; a seeded judge, final labels on every third episode, and those pairs."""
    lines = [json.loads(line) for line in (DATA / "tasks.jsonl").read_text().splitlines() if line.strip()]
    lines = list({t["task_id"]: t for t in lines}.values())  # one task is in the file twice, line for line
    slugs = sorted({t["site"] for t in lines})
    sites = {s.slug: s for s in Site.objects.bulk_create([Site(slug=slug) for slug in slugs])}
    tasks = Task.objects.bulk_create([Task(task_id=t["task_id"], site=sites[t["site"]], instruction=t["instruction"],
                                           task_kind=t["task_kind"], raw=t) for t in lines])
    run, config = RunFactory(name="online-mind2web"), JudgeConfigFactory(provider="gemini", model="gemini-3.5-flash")
    episodes = Episode.objects.bulk_create([Episode(run=run, task=t, site=t.site, task_kind=t.task_kind, task_order=i)
                                            for i, t in enumerate(tasks)])
    rng, pairs = random.Random(6), []
    for index, episode in enumerate(episodes):
        says = rng.random() < 0.6
        Judgment.objects.create(episode=episode, config=config, verdict="SUCCESS" if says else "NOT SUCCESS")
        if index % 3 == 0:
            truth = rng.random() < 0.5
            FinalLabel.objects.create(episode=episode, verdict="SUCCESS" if truth else "NOT SUCCESS")
            pairs.append((truth, says))
    return run, config, pairs


def test_human_truth_on_real_tasks_matches_the_reference_formula(mind2web):
    run, config, pairs = mind2web
    report = validate_compute(runs=[run], config=config, against="human")
    assert report.reference_line == reference_validate(pairs)
    assert report.episodes_in_runs == 300 and report.sample["judged_success"]["population"] > 0


def test_the_page_shows_real_sites_and_explains_the_missing_verifiers(viewer_client, mind2web):
    run, config, _ = mind2web
    query = {"runs": [run.pk], "config": config.pk}
    human = viewer_client.get(reverse("review:validate"), {**query, "against": "human"}).content.decode()
    assert "careers-walmart-com" in human and "Estimate from the labelled sample" in human
    assert "No estimate yet" in human  # issue 22: these labels were not drawn by a random design
    verifier = viewer_client.get(reverse("review:validate"), {**query, "against": "verifier"}).content.decode()
    assert "Runs of proposed tasks have no verifiers" in verifier
