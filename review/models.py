"""The review pages' own data: review queues (built-in, saved from a filter, an explicit episode list, a sample or a
certificate's design) and their reservations. The labels they collect are the data model's
(`taskgen.models.labels`), read by the stages below.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from taskgen.models import Episode


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
