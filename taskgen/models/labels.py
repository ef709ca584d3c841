"""The reviewers' data: labels (one per reviewer per episode, every change kept), final labels (after the agreement
rule or an adjudication, with their history), the known-truth checks served to reviewers, and the random order a
certificate labels a run's episodes in. The review pages write them through `taskgen.labels`; the stages read them.

Their tables keep the names they were made with in the review app (`review_label`, ...): the data never moved.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from taskgen.models.episodes import Episode


class LabelVerdict(models.TextChoices):
    SUCCESS = "SUCCESS", "Success"
    NOT_SUCCESS = "NOT SUCCESS", "Not success"
    UNSURE = "UNSURE", "Unsure"


class Label(models.Model):
    """One reviewer's label of one episode; edits update it and add a LabelChange.

    Labels are what money cannot rebuild: an episode (or run) with labels cannot be deleted (PROTECT), and a label
    is only ever written by `taskgen.labels.write.label_write`, which keeps its history and the final label.
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
        db_table = "review_label"  # made when these lived in the review app
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
        db_table = "review_labelchange"  # made when these lived in the review app
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
        db_table = "review_finallabel"  # made when these lived in the review app
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
        db_table = "review_finallabelchange"  # made when these lived in the review app
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.episode_id} @ {self.changed_at:%Y-%m-%d %H:%M}"


class ReviewerCheck(models.Model):
    """A known-truth check served to a reviewer: an episode a verifier decided, mixed into a queue unmarked (issue 22).
    The reviewer's answer is their first label of it, read from the label's history (the verifier is hidden until
    they label, so a later change, made with the verifier in view, does not count)."""

    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="reviewer_checks")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviewer_checks")
    # The queue that served it, kept as a plain id: queues are the review pages' own, a layer above this one.
    queue_id = models.BigIntegerField(null=True, blank=True)
    truth = models.BooleanField(help_text="the verifier's result when the check was served")
    served_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "review_reviewercheck"  # made when these lived in the review app
        constraints = [models.UniqueConstraint(fields=["episode", "reviewer"], name="reviewer_check_once")]

    def __str__(self) -> str:
        return f"check {self.episode_id} for {self.reviewer_id}"


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
        db_table = "review_certifydesign"  # made when these lived in the review app
        constraints = [models.UniqueConstraint(fields=["run", "judge_config"], name="certify_design_one_per_config")]

    def __str__(self) -> str:
        return f"certify design {self.run_id}/{self.judge_config_id} seed {self.seed}"
