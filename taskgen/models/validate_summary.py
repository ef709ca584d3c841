"""Validate's summary (issue 12): cells of episode counts kept by PostgreSQL triggers (review/migrations/0006) and
re-summed by taskgen/stages/validate/summary.py. Tables keep the names they were made with in the review app.
"""
from __future__ import annotations

from django.db import models

_CELL_KEYS = ["run_id", "site_id", "task_kind", "config_a", "config_b", "verdict_a", "verdict_b", "verifier", "final"]


class _CellKey(models.Model):
    """Where an episode counts: its run, site and task kind; a judge config's verdict (config_a, 0 for "every
    episode"), or two configs' verdicts on it (config_a < config_b); its verifier result (1 ok, 0 not, -1 none) and
    final label ('' none). Plain ids, not foreign keys: the summary follows deletions through the triggers."""

    run_id = models.BigIntegerField()
    site_id = models.BigIntegerField()
    task_kind = models.CharField(max_length=10)
    config_a = models.BigIntegerField()
    config_b = models.BigIntegerField()
    verdict_a = models.CharField(max_length=12)
    verdict_b = models.CharField(max_length=12)
    verifier = models.SmallIntegerField()
    final = models.CharField(max_length=12)
    cost_a = models.DecimalField(max_digits=24, decimal_places=6)
    cost_b = models.DecimalField(max_digits=24, decimal_places=6)

    class Meta:
        abstract = True


class ValidateCell(_CellKey):
    """How many episodes count in each cell, with the judgments' cost: what the validate page sums."""

    n = models.BigIntegerField()

    class Meta:
        db_table = "review_validatecell"  # made when these lived in the review app
        constraints = [models.UniqueConstraint(fields=_CELL_KEYS, name="validate_cell_unique")]

    def __str__(self) -> str:
        return f"run {self.run_id} config {self.config_a}/{self.config_b}: {self.n}"


class ValidateEpisodeCell(_CellKey):
    """The cells one episode counts in as last summed: taken back out when the episode changes."""

    episode_id = models.BigIntegerField(db_index=True)

    class Meta:
        db_table = "review_validateepisodecell"  # made when these lived in the review app

    def __str__(self) -> str:
        return f"episode {self.episode_id} config {self.config_a}/{self.config_b}"


class ValidateDirtyEpisode(models.Model):
    """An episode whose judgments, verifier result, final label or place changed since the summary was last brought
    up to date (written by the triggers, consumed by `validate_summary_refresh`)."""

    episode_id = models.BigIntegerField()

    class Meta:
        db_table = "review_validatedirtyepisode"  # made when these lived in the review app
        # The refresh takes every mark of an episode at once (an episode written four ways is re-summed once).
        indexes = [models.Index(fields=["episode_id"], name="validate_dirty_episode")]

    def __str__(self) -> str:
        return f"episode {self.episode_id}"


class EpisodeRisks(models.Model):
    """The risks one judge config's judgment of an episode holds, one bit each (bit i: the i-th of
    taskgen/triage/risk.RISK_NAMES), kept beside validate's summary: an episode the triggers mark is re-read for both
    (taskgen/triage/risks_kept.py), so a whole run's judged successes and their strata are one index scan instead of
    a query per risk over half a million episodes. Plain ids like the cells: the triggers follow every write."""

    episode_id = models.BigIntegerField()
    run_id = models.BigIntegerField()
    config_id = models.BigIntegerField()
    verdict = models.CharField(max_length=12)
    risks = models.SmallIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode_id", "config_id"], name="episode_risks_unique")]
        indexes = [models.Index(fields=["run_id", "config_id", "verdict"], include=["episode_id", "risks"],
                                name="episode_risks_run")]

    def __str__(self) -> str:
        return f"episode {self.episode_id} config {self.config_id}: risks {self.risks:#b}"


class RiskDirtyEpisode(models.Model):
    """An episode validate's summary re-summed whose kept risks (EpisodeRisks) are still to be re-read: written by the
    summary's refresh, consumed by `taskgen/triage/risks_kept.py: risks_refresh` when the kept risks are read (or by
    beat), so a page that reads only the cells never pays for the risks."""

    episode_id = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["episode_id"], name="risk_dirty_episode")]

    def __str__(self) -> str:
        return f"episode {self.episode_id}"


class RunEpisodes(models.Model):
    """Which episodes a run holds, as validate's summary has counted them: how many, and the sums of their ids and of
    their squares, moved by the summary's refresh as it takes episodes in and out of the run's cells (an episode
    added, deleted or moved to another run changes them; a judgment or a label does not). The export order's
    signature (taskgen/stages/export/order.py) without reading the run's million ids."""

    run_id = models.BigIntegerField(primary_key=True)
    episodes = models.BigIntegerField()
    id_sum = models.DecimalField(max_digits=40, decimal_places=0)
    id_square_sum = models.DecimalField(max_digits=60, decimal_places=0)

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.episodes} episodes"
