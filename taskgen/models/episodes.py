"""Runs (a harness run over a task set: the reference's run dir), their episodes with the evidence each recorded,
the screenshots (blobs stored once by content hash) and the verifiers' results.

An Episode is one (run, task) attempt, as in DESIGN.md."""
from __future__ import annotations

from django.db import models
from django.urls import reverse

from taskgen.endings import Ending, ending_of
from taskgen.models.sites import Site, Task


class Run(models.Model):
    """One harness run over a task set: the reference's run dir."""

    class Origin(models.TextChoices):
        IMPORT = "import", "imported run dir"
        ATTEMPT = "attempt", "attempted here"

    name = models.CharField(max_length=200, unique=True)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.IMPORT)
    source_dir = models.CharField(max_length=1000, blank=True)
    tasks_file = models.CharField(max_length=1000, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    arm = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("review:run_detail", args=[self.pk])


class Episode(models.Model):
    """One recorded attempt of a task in a run, with the backend evidence the judge sees.

    `task_order` is the task's line number in the run's tasks file (the rows stage walks each site in file order);
    `site` and `task_kind` repeat the task's so review queues filter on this table alone.
    """

    class Status(models.TextChoices):
        RECORDED = "recorded", "recorded"
        FAILED = "failed", "failed"  # its ending says why (taskgen/endings.py), its failure_reason in words

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="episodes")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="episodes")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="episodes")
    task_kind = models.CharField(max_length=10, choices=Task.Kind.choices, default=Task.Kind.ACTION)
    task_order = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECORDED)
    failure_reason = models.TextField(blank=True)
    # How it ended, as the harness recorded it (grade_inputs.json or rows/episode.json; taskgen/endings.py names the
    # kinds): "" for a run dir that does not say.
    finished = models.CharField(max_length=40, blank=True)
    end_reason = models.TextField(blank=True)
    end_step = models.PositiveIntegerField(null=True, blank=True)
    # grade_inputs.json: {actions, answer, log, changes, seen}; anything else it held goes to `extra`.
    actions = models.JSONField(default=list, blank=True)
    answer = models.TextField(blank=True)
    request_log = models.JSONField(default=list, blank=True)
    data_changes = models.JSONField(default=list, blank=True)
    screen_text = models.JSONField(default=list, blank=True, help_text="`seen`: the text of each page, last last")
    extra = models.JSONField(default=dict, blank=True)
    # rows/: the training rows, kept byte for byte for export.
    rows_jsonl = models.TextField(blank=True)
    episode_json = models.TextField(blank=True)
    row_count = models.PositiveIntegerField(default=0)
    has_rows = models.BooleanField(default=False)
    steps = models.PositiveIntegerField(default=0)
    screens = models.PositiveIntegerField(default=0, help_text="its step and final screenshots (written with them at "
                                                               "import): the run table shows and sorts them")
    source_path = models.CharField(max_length=1000, blank=True)
    content_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the imported files")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "task_order", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "task"], name="episode_unique_per_run_task")]
        indexes = [
            models.Index(fields=["run", "task_order"]),
            # The run table sorted by a column of the episode (issue 26: a million episodes) walks one of these in
            # order, either way, and stops at its page; a site's or a kind's rows in line order serve its queues
            # and the table's groups (review/run_table_groups.py).
            models.Index(fields=["run", "site", "task_order", "id"], name="episode_run_site_line"),
            models.Index(fields=["run", "task_kind", "task_order", "id"], name="episode_run_kind_line"),
            models.Index(fields=["run", "steps", "task_order", "id"], name="episode_run_steps_line"),
            models.Index(fields=["run", "screens", "task_order", "id"], name="episode_run_screens_line"),
            models.Index(fields=["run", "finished", "task_order", "id"], name="episode_run_ended_line"),
            # A run's table sorted or filtered on its judge, verifier or label columns joins every episode of the
            # run: read from this index alone (PostgreSQL), that join costs half (100,000 episodes: 80 -> 42 ms).
            models.Index(fields=["run", "id"], include=["task_order", "task_kind", "site"], name="episode_run_rows"),
        ]

    def __str__(self) -> str:
        return f"{self.run.name}/{self.task.task_id}"

    def get_absolute_url(self) -> str:
        return reverse("review:episode_detail", args=[self.pk])

    @property
    def ending(self) -> Ending:
        """How the episode ended: its kind, step and reason."""
        return ending_of(finished=self.finished, end_reason=self.end_reason, end_step=self.end_step)

    @property
    def last_screen_text(self) -> str:
        """The text of the last page the agent saw; a JSON page is shown as JSON text."""
        import json

        last = (self.screen_text or [""])[-1] if isinstance(self.screen_text, list) else self.screen_text
        return last if isinstance(last, str) else json.dumps(last, ensure_ascii=False, default=str)


class Blob(models.Model):
    """Content stored once by sha256 under MEDIA_ROOT/blobs/ab/<sha>; images are checked and measured with Pillow."""

    # Unique by a Meta constraint, not unique=True: on PostgreSQL that also builds a varchar_pattern_ops
    # index for LIKE that no query uses, and every import's COPY into this table paid for it.
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100, default="image/png")
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    has_thumbnail = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["sha256"], name="blob_unique_sha256")]

    def __str__(self) -> str:
        return self.sha256[:12]

    def get_absolute_url(self) -> str:
        return reverse("review:blob", args=[self.sha256])

    @property
    def relative_path(self) -> str:
        return self.relative_path_of(self.sha256)

    @staticmethod
    def relative_path_of(sha256: str) -> str:
        """Where the blob of this content hash lives under MEDIA_ROOT (readers holding only a hash use it too): one
        folder level, at most 256 folders (migration 0029 says why)."""
        return f"blobs/{sha256[:2]}/{sha256}"

    @property
    def thumbnail_relative_path(self) -> str:
        return f"thumbs/{self.sha256[:2]}/{self.sha256[2:4]}/{self.sha256}.webp"

    def get_thumbnail_url(self) -> str:
        return reverse("review:blob_thumbnail", args=[self.sha256])


class Screenshot(models.Model):
    """An image of an episode: a step screen (screenshots/step_N.png), the final screen, or a training-row image."""

    class Kind(models.TextChoices):
        STEP = "step", "step"
        FINAL = "final", "final"
        ROW = "row", "row image"

    # No index of its own: the unique (episode, kind, name) and the (episode, kind, step) index both lead with it.
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="screenshots", db_index=False)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.STEP)
    step = models.IntegerField(default=0)
    name = models.CharField(max_length=255, help_text="the file name as imported, e.g. step_3.png")
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="screenshots")

    class Meta:
        ordering = ["episode", "kind", "step"]
        constraints = [models.UniqueConstraint(fields=["episode", "kind", "name"], name="screenshot_unique_name")]
        indexes = [models.Index(fields=["episode", "kind", "step"])]

    def __str__(self) -> str:
        return f"{self.episode_id}:{self.kind}:{self.name}"


class VerifierResult(models.Model):
    """A programmatic verifier's result for an episode (results_regraded.jsonl wins over results.jsonl)."""

    class Source(models.TextChoices):
        RESULTS = "results.jsonl", "results.jsonl"
        REGRADED = "results_regraded.jsonl", "results_regraded.jsonl"
        SANDBOX = "sandbox", "sandbox verifier"

    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="verifier_result")
    ok = models.BooleanField()
    source = models.CharField(max_length=40, choices=Source.choices)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["ok"])]

    def __str__(self) -> str:
        return f"{self.episode_id}:{'pass' if self.ok else 'fail'}"

    @staticmethod
    def reason_of(ok: bool | None, detail: dict | None) -> str:
        """Which checks decided a verifier's result, in words: 'failed “A”, “B”' for a fail, 'passed its 3 checks'
        for a pass; "" when the source names no check (a results.jsonl line is only pass or fail)."""
        if ok is None:
            return ""
        checks = VerifierResult.checks_of(detail)
        if ok:
            return f"passed its {len(checks)} check{'s' if len(checks) != 1 else ''}" if checks else ""
        failed = [check["part"] for check in checks if not check["ok"]]
        if failed:
            return "failed " + ", ".join(f"“{name}”" for name in failed)
        error = (detail or {}).get("error") if isinstance(detail, dict) else None
        return f"could not run: {error}" if error else ""

    @staticmethod
    def checks_of(detail: dict | None) -> list[dict]:
        """The verifier's checks as [{part, ok}] (the sandbox verifier's parts), whatever shape the detail has."""
        parts = detail.get("parts") if isinstance(detail, dict) else None
        return [{"part": str(p.get("part", "")), "ok": bool(p.get("ok"))}
                for p in (parts if isinstance(parts, list) else []) if isinstance(p, dict)]

    @property
    def reason(self) -> str:
        return self.reason_of(self.ok, self.detail)

    @property
    def checks(self) -> list[dict]:
        return self.checks_of(self.detail)
