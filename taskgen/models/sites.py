"""Sites, their tasks (proposed or written by people), the proposal batches that asked a model for tasks, and every
human edit of a task."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Left

from taskgen.providers import provider_can


class Site(models.Model):
    """A website tasks are attempted on (a sandbox site, or a real site named in an imported tasks file)."""

    slug = models.SlugField(max_length=200, unique=True)
    name = models.CharField(max_length=200, blank=True)
    home_path = models.CharField(max_length=500, blank=True)
    base_url = models.CharField(max_length=500, blank=True)
    sitemap = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug


INSTRUCTION_SORT_CHARS = 500  # of an instruction, in its sort index


class Task(models.Model):
    """One goal for an agent, as a line of tasks.jsonl; `raw` keeps the line as read for faithful re-export."""

    class Kind(models.TextChoices):
        INFO = "info", "information"
        ACTION = "action", "action"

    class ReviewState(models.TextChoices):
        PROPOSED = "proposed", "proposed"
        APPROVED = "approved", "approved"
        DROPPED = "dropped", "dropped"

    task_id = models.CharField(max_length=200, unique=True)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="tasks")
    instruction = models.TextField()
    task_kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.ACTION)
    source = models.CharField(max_length=40, default="proposed", help_text="the file's `kind`: proposed, human, ...")
    start_path = models.CharField(max_length=1000, blank=True)
    macro = models.CharField(max_length=200, blank=True)
    verifier = models.JSONField(null=True, blank=True)
    proposed_by_model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=100, blank=True)
    raw = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A proposer's task waits for a human: only approved tasks go to an attempt run (unless the admin says all).
    # Tasks from a tasks file were chosen by whoever wrote it, so they count as approved.
    review_state = models.CharField(max_length=10, choices=ReviewState.choices, default=ReviewState.APPROVED)
    proposal_batch = models.ForeignKey("ProposalBatch", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="tasks")
    grounding_note = models.CharField(max_length=500, blank=True,
                                      help_text="what the task names that the site's context does not show")
    review_flag = models.CharField(max_length=500, blank=True, help_text="a reviewer's note asking an admin to look")

    class Meta:
        ordering = ["task_id"]
        indexes = [models.Index(fields=["site", "task_kind"]), models.Index(fields=["site", "review_state"]),
                   # The run table sorted by instruction walks this and stops at its page (issue 26). Its first 500
                   # characters: a B-tree entry holds at most about 2,700 bytes, and a whole instruction may not fit.
                   models.Index(Left("instruction", INSTRUCTION_SORT_CHARS), name="task_instruction_sort")]

    def __str__(self) -> str:
        return self.task_id


class ProposalBatch(models.Model):
    """One proposer call for one site: what it was shown and asked, what it answered, and what of it was kept."""

    pipeline_run = models.ForeignKey("PipelineRun", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="proposal_batches")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="proposal_batches")
    index = models.PositiveIntegerField(help_text="the batch's number within its run and site, from 0")
    focus = models.TextField(blank=True)
    avoid = models.JSONField(default=list, blank=True, help_text="the site's recent tasks the proposer was shown")
    context = models.TextField(blank=True, help_text="the site context the proposer saw")
    context_problems = models.JSONField(default=list, blank=True, help_text="pages that could not be read")
    prompt = models.TextField(blank=True)
    raw_answer = models.TextField(blank=True)
    answer_error = models.CharField(max_length=500, blank=True, help_text="why the answer could not be read")
    asked = models.PositiveIntegerField(default=0)
    kept = models.PositiveIntegerField(default=0)
    duplicates = models.PositiveIntegerField(default=0)
    invalid = models.PositiveIntegerField(default=0)
    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["site", "pipeline_run", "index"]
        constraints = [models.UniqueConstraint(fields=["pipeline_run", "site", "index"],
                                               name="one_batch_per_run_site_index")]

    def __str__(self) -> str:
        return f"batch {self.index} of {self.site.slug} (run {self.pipeline_run_id})"

    @property
    def is_offline_baseline(self) -> bool:
        return provider_can(self.provider, "offline")


class TaskEdit(models.Model):
    """One human change to a task (edit, drop, restore, approve, flag): who, when, and the fields before and after."""

    class Action(models.TextChoices):
        EDIT = "edit", "edit"
        DROP = "drop", "drop"
        RESTORE = "restore", "restore"
        APPROVE = "approve", "approve"
        FLAG = "flag", "flag"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="edits")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="task_edits")
    action = models.CharField(max_length=10, choices=Action.choices)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.action} of {self.task_id} by {self.user_id}"

    def changes(self) -> list[tuple[str, object, object]]:
        """(field, before, after) for each field the edit changed."""
        names = list(dict.fromkeys([*self.before, *self.after]))
        return [(n, self.before.get(n), self.after.get(n)) for n in names if self.before.get(n) != self.after.get(n)]
