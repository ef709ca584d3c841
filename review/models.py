"""The human side: labels (one per reviewer per episode, every change kept) and final labels after adjudication.

Queues, reservations and saved filters are added by the review workbench.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from taskgen.models import Episode


class LabelVerdict(models.TextChoices):
    SUCCESS = "SUCCESS", "Success"
    NOT_SUCCESS = "NOT SUCCESS", "Not success"
    UNSURE = "UNSURE", "Unsure"


class Label(models.Model):
    """One reviewer's label of one episode; edits update it and add a LabelChange."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="labels")
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

    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="changes")
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

    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="final_label")
    verdict = models.CharField(max_length=12, choices=LabelVerdict.choices)
    reason = models.TextField(blank=True)
    adjudicated = models.BooleanField(default=False)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["verdict"])]

    def __str__(self) -> str:
        return f"{self.episode_id}:{self.verdict}"
