"""A run of judged successes with known truth, for the certificate's tests: riskiest episodes (the verdict contradicts
its parts) are false positives half the time, the rest rarely."""
from __future__ import annotations

import random

from review.services import label_set
from taskgen.models import Judgment
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, UserFactory


def judged_run(*, episodes: int = 40, risky: int = 8, seed: int = 3, rest_rate: float = 0.95):
    """A run whose every episode has rows and a SUCCESS verdict; returns (run, config, truth by episode id)."""
    rng = random.Random(seed)
    run, config = RunFactory(), JudgeConfigFactory()
    truth = {}
    for i in range(episodes):
        episode = EpisodeFactory(run=run, has_rows=True, row_count=2, rows_jsonl="{}\n{}\n")
        JudgmentFactory(episode=episode, config=config, verdict=Judgment.Verdict.SUCCESS, inconsistent=i < risky)
        truth[episode.pk] = rng.random() < (0.5 if i < risky else rest_rate)
    return run, config, truth


def label_as_truth(episode_ids, truth, reviewer=None) -> None:
    from taskgen.models import Episode
    reviewer = reviewer or UserFactory(username="truthful", role="reviewer")
    for episode in Episode.objects.filter(pk__in=list(episode_ids)):
        label_set(episode=episode, reviewer=reviewer, verdict="SUCCESS" if truth[episode.pk] else "NOT SUCCESS")
