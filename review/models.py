"""The human side: labels (one per reviewer per episode, every change kept), final labels after adjudication,
and review queues (built-in, saved from a filter, or an explicit episode list) with their reservations.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from taskgen.models import Episode


class LabelVerdict(models.TextChoices):
    SUCCESS = "SUCCESS", "Success"
    NOT_SUCCESS = "NOT SUCCESS", "Not success"
    UNSURE = "UNSURE", "Unsure"


class Label(models.Model):
    """One reviewer's label of one episode; edits update it and add a LabelChange.

    Labels are what money cannot rebuild: an episode (or run) with labels cannot be deleted (PROTECT), and a label
    is only ever written by `review.services.label_set`, which keeps its history and the final label.
    """

    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="labels")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    verdict = models.CharField(max_length=12, choices=LabelVerdict.choices)
    part_overrides = models.JSONField(default=list, blank=True, help_text="indexes of judge parts marked wrong")
    note = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "reviewer"], name="label_unique_per_reviewer")]
        indexes = [models.Index(fields=["reviewer", "updated_at"]), models.Index(fields=["episode", "verdict"])]

    def __str__(self) -> str:
        return f"{self.episode_id}:{self.reviewer_id}:{self.verdict}"

    def as_record(self) -> dict:
        """The label's reviewable content, as kept in the audit log."""
        return {"verdict": self.verdict, "part_overrides": self.part_overrides, "note": self.note, "tags": self.tags}


class LabelChange(models.Model):
    """The audit log: who changed which label when, with the content before and after."""

    label = models.ForeignKey(Label, on_delete=models.PROTECT, related_name="changes")
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="label_changes")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField()
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.label_id} @ {self.changed_at:%Y-%m-%d %H:%M}"


class FinalLabel(models.Model):
    """The label validate and exports use: set by an adjudicator when reviewers disagree (or from a single label)."""

    episode = models.OneToOneField(Episode, on_delete=models.PROTECT, related_name="final_label")
    verdict = models.CharField(max_length=12, choices=LabelVerdict.choices)
    reason = models.TextField(blank=True)
    adjudicated = models.BooleanField(default=False)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    decided_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["verdict"])]

    def __str__(self) -> str:
        return f"{self.episode_id}:{self.verdict}"


class FinalLabelChange(models.Model):
    """The final label's history: every change of an episode's final label (by the agreement rule after a label, or by
    an adjudication), with who caused it and the final label before and after (None: no final label)."""

    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="final_label_changes")
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="final_label_changes")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.episode_id} @ {self.changed_at:%Y-%m-%d %H:%M}"


class Queue(models.Model):
    """A list of episodes to review. Built-in kinds select by the judge's verdict; `filter` queues are saved filters
    (run, site, task kind, verdicts, tags); `episodes` and `sample` queues hold an explicit list (QueueMember)."""

    class Kind(models.TextChoices):
        FALSE_POSITIVE = "false-positive", "judge SUCCESS, not yet reviewed, riskiest first (false-positive audit)"
        DISAGREE = "judge-vs-verifier", "judge and verifier disagree"
        INCONSISTENT = "inconsistent", "verdict inconsistent with its own parts"
        NO_VERDICT = "no-verdict", "judge gave no verdict"
        SAMPLE = "sample", "random sample, stratified by judge verdict"
        CERTIFY = "certify", "certify an export: the design's next labels"
        FILTER = "filter", "saved filter"
        EPISODES = "episodes", "explicit list of episodes"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.FILTER)
    builtin = models.BooleanField(default=False)
    run = models.ForeignKey("taskgen.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="queues",
                            help_text="built-in queues: the run they audit (each run gets its own)")
    filters = models.JSONField(default=dict, blank=True, help_text="{runs, sites, task_kind, verdicts, tags}")
    judge_config = models.ForeignKey("taskgen.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL,
                                     help_text="whose verdicts the queue reads; empty: any judge config")
    labels_needed = models.PositiveSmallIntegerField(default=1, help_text="K: labels per episode before it is done")
    blind = models.BooleanField(default=False, help_text="hide the judge and other labels until the reviewer labels")
    sample_size = models.PositiveIntegerField(default=0, help_text="sample queues: episodes per judge verdict")
    sample_population = models.JSONField(default=dict, blank=True,
                                         help_text="sample queues: episodes per judge verdict when drawn (weights)")
    certify = models.JSONField(default=dict, blank=True,
                               help_text="certify queues: the export they certify {source, exclude_risk, target, ...}")
    check_rate = models.FloatField(default=0.0, help_text="share of the items served that are known-truth checks "
                                                          "(episodes a verifier decided), unmarked: 0 for none")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-builtin", "name", "id"]
        constraints = [models.UniqueConstraint(fields=["kind", "run"], condition=models.Q(builtin=True),
                                               name="queue_one_builtin_per_kind_and_run")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("review:queue_detail", args=[self.pk])

    @property
    def has_members(self) -> bool:
        return self.kind in {self.Kind.SAMPLE, self.Kind.EPISODES}


class CertifyDesign(models.Model):
    """The random order in which a run's judged successes are labelled to certify an export (one per run and judge
    config): each stratum is read in the order of a keyed hash of (seed, episode id), the seed drawn once at random
    and kept here, so any subset of the episodes (a stratum, a cut) is in a uniformly random order."""

    run = models.ForeignKey("taskgen.Run", on_delete=models.CASCADE, related_name="certify_designs")
    judge_config = models.ForeignKey("taskgen.JudgeConfig", on_delete=models.CASCADE, related_name="certify_designs")
    seed = models.BigIntegerField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "judge_config"], name="certify_design_one_per_config")]

    def __str__(self) -> str:
        return f"certify design {self.run_id}/{self.judge_config_id} seed {self.seed}"


class QueueMember(models.Model):
    """One episode of an explicit-list or sample queue, in review order."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="members")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="queue_memberships")
    position = models.PositiveIntegerField(default=0)
    stratum = models.CharField(max_length=20, blank=True, help_text="sample queues: the judge verdict sampled from")

    class Meta:
        ordering = ["queue", "position"]
        constraints = [models.UniqueConstraint(fields=["queue", "episode"], name="queue_member_unique")]

    def __str__(self) -> str:
        return f"{self.queue_id}:{self.episode_id}"


class Reservation(models.Model):
    """An episode of a queue held for one reviewer until `expires_at`, so two reviewers never take the same item."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="reservations")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="reservations")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reservations")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "episode"], name="reservation_unique_per_item")]
        indexes = [models.Index(fields=["queue", "expires_at"]), models.Index(fields=["reviewer", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.queue_id}:{self.episode_id} -> {self.reviewer_id}"


class ReviewerCheck(models.Model):
    """A known-truth check served to a reviewer: an episode a verifier decided, mixed into a queue unmarked (issue 22).
    The reviewer's answer is their first label of it, read from the label's history (the verifier is hidden until
    they label, so a later change, made with the verifier in view, does not count)."""

    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="reviewer_checks")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviewer_checks")
    queue = models.ForeignKey(Queue, null=True, blank=True, on_delete=models.SET_NULL, related_name="checks")
    truth = models.BooleanField(help_text="the verifier's result when the check was served")
    served_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "reviewer"], name="reviewer_check_once")]

    def __str__(self) -> str:
        return f"check {self.episode_id} for {self.reviewer_id}"


# ── validate's summary (issue 12): kept by PostgreSQL triggers, read by taskgen/stages/validate/summary.py ──

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
        constraints = [models.UniqueConstraint(fields=_CELL_KEYS, name="validate_cell_unique")]

    def __str__(self) -> str:
        return f"run {self.run_id} config {self.config_a}/{self.config_b}: {self.n}"


class ValidateEpisodeCell(_CellKey):
    """The cells one episode counts in as last summed: taken back out when the episode changes."""

    episode_id = models.BigIntegerField(db_index=True)

    def __str__(self) -> str:
        return f"episode {self.episode_id} config {self.config_a}/{self.config_b}"


class ValidateDirtyEpisode(models.Model):
    """An episode whose judgments, verifier result, final label or place changed since the summary was last brought
    up to date (written by the triggers, consumed by `validate_summary_refresh`)."""

    episode_id = models.BigIntegerField()

    class Meta:
        # The refresh takes every mark of an episode at once (an episode written four ways is re-summed once).
        indexes = [models.Index(fields=["episode_id"], name="validate_dirty_episode")]

    def __str__(self) -> str:
        return f"episode {self.episode_id}"
