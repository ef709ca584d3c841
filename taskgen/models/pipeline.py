"""Pipeline runs of every stage, their work units (the engine's truth), exports, and the lines of a labels restore
while it is checked and written."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from taskgen.models.episodes import Run
from taskgen.models.judging import JudgeConfig


class PipelineRun(models.Model):
    """One start of a pipeline stage (import, attempt, judge, validate, rows, propose), tracked in our own table."""

    class Stage(models.TextChoices):
        IMPORT = "import", "import"
        PROPOSE = "propose", "propose"
        ATTEMPT = "attempt", "attempt"
        JUDGE = "judge", "judge"
        VALIDATE = "validate", "validate"
        EXPORT = "export", "export rows"
        LABELS = "labels", "restore labels"

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    stage = models.CharField(max_length=20, choices=Stage.choices)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="pipeline_runs")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="pipeline_runs")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    stopped_seconds = models.FloatField(default=0, help_text="time it sat cancelled or failed before a resume: not "
                                                             "part of how long it took")
    woken_at = models.DateTimeField(null=True, blank=True, help_text="when workers were last sent for its units")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"{self.stage} #{self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("review:pipeline_detail", args=[self.pk])

    @property
    def worked_seconds(self) -> float | None:
        """How long it took, or has been running: from its start to its end (or now), less the time it sat stopped
        before a resume; None before it started."""
        if self.started_at is None:
            return None
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds() - self.stopped_seconds

    @property
    def is_finished(self) -> bool:
        return self.status in {self.Status.DONE, self.Status.FAILED, self.Status.CANCELLED}

    @property
    def percent(self) -> int:
        return int(100 * (self.done + self.failed) / self.total) if self.total else 0


class WorkUnit(models.Model):
    """One unit of a PipelineRun's work (an episode to judge, a run dir to import, an export to write): the truth
    of a run's progress. Workers claim units with a lease; the reconciler re-queues units whose lease ran out."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    pipeline_run = models.ForeignKey(PipelineRun, on_delete=models.CASCADE, related_name="units")
    key = models.CharField(max_length=300, help_text="what the unit is, in its stage's words (an episode id, ...)")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    not_before = models.DateTimeField(null=True, blank=True, help_text="a unit told to wait is not leased before")
    last_error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pipeline_run", "key"], name="one_unit_per_key")]
        indexes = [models.Index(fields=["pipeline_run", "status"]), models.Index(fields=["status", "lease_until"])]

    def __str__(self) -> str:
        return f"unit {self.key} of {self.pipeline_run_id} ({self.status})"


class Export(models.Model):
    """One export of approved rows: its parameters, report and the exact episode list (the manifest)."""

    class Selection(models.TextChoices):
        JUDGE = "judge", "judge successes"
        HUMAN = "human", "final human labels"
        HUMAN_OVER_JUDGE = "human-over-judge", "human labels over judge verdicts"

    runs = models.ManyToManyField(Run, related_name="exports")
    selection = models.CharField(max_length=20, choices=Selection.choices, default=Selection.JUDGE)
    judge_config = models.ForeignKey(JudgeConfig, null=True, blank=True, on_delete=models.SET_NULL)
    params = models.JSONField(default=dict, blank=True, help_text="where it was written (what chose it: manifest)")
    manifest = models.JSONField(default=dict, blank=True, help_text="the episode list, the parameters that chose "
                                                                    "it (budget included) and the report")
    manifest_sha256 = models.CharField(max_length=64, blank=True)
    out_dir = models.CharField(max_length=1000, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"export #{self.pk} ({self.selection})"

    def get_absolute_url(self) -> str:
        return reverse("review:export_detail", args=[self.pk])

    @property
    def budget(self) -> int | None:
        """The step budget, stored once: in the manifest's parameters."""
        return (self.manifest.get("params") or {}).get("budget")

    @property
    def report(self) -> dict:
        """_report.json's content (the reference's format), as the manifest holds it."""
        return self.manifest.get("report") or {}


class LabelRestoreLine(models.Model):
    """One line of a labels backup being restored (the `labels` stage): what its check made of it, and once written,
    what became of it. The check of every line comes before any write, so a restore can write nothing when a line
    is refused (all or nothing); the outcome is set in the transaction that writes the line, so a restore resumed
    after a lost worker writes each line once. Lines written are dropped when the restore ends with every unit
    done; refused lines stay, with why, for the run's page and the command line."""

    class Outcome(models.TextChoices):
        PENDING = "", "not written yet"
        ADDED = "added", "added"
        UNCHANGED = "unchanged", "already there"
        REFUSED = "refused", "refused"

    pipeline_run = models.ForeignKey(PipelineRun, on_delete=models.CASCADE, related_name="label_restore_lines")
    line = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, blank=True)
    episode_id = models.BigIntegerField(null=True, blank=True)
    bucket = models.PositiveIntegerField(null=True, blank=True, help_text="the write unit that writes it")
    row = models.JSONField(default=dict, blank=True, help_text="the checked values to write")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.PENDING, blank=True)
    refusal = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pipeline_run", "line"], name="label_restore_line_once")]
        indexes = [models.Index(fields=["pipeline_run", "bucket"])]

    def __str__(self) -> str:
        return f"{self.pipeline_run_id}:{self.line}:{self.kind}:{self.outcome or 'pending'}"


class ExportOrder(models.Model):
    """A run's episodes in the reference's export order (taskgen/stages/export/order.py: `_round_robin`), kept so a
    certificate or an export reads only as far into the run as its step budget reaches, not every episode each time.
    `signature` names what it was computed from (the run's episodes and its tasks file); a different one recomputes
    it. `episode_ids` holds the ids as little-endian 64-bit integers."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="export_order")
    signature = models.CharField(max_length=400)
    order_from = models.CharField(max_length=20)
    episode_ids = models.BinaryField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"export order of run {self.run_id}"
