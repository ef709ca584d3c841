"""The pipeline's data: sites, tasks, runs, episodes with their evidence, screenshots, judgments, verifier results,
pipeline runs and exports. Labels and queues (the human side) live in `review.models`.

Relations follow DESIGN.md: an Episode is one (run, task) attempt; a Judgment is one (episode, judge config) verdict.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Left
from django.urls import reverse
from django.utils import timezone

from taskgen.endings import Ending, ending_of


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
    """Content stored once by sha256 under MEDIA_ROOT/blobs/ab/cd/<sha>; images are checked and measured with Pillow."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100, default="image/png")
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    has_thumbnail = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.sha256[:12]

    def get_absolute_url(self) -> str:
        return reverse("review:blob", args=[self.sha256])

    @property
    def relative_path(self) -> str:
        return self.relative_path_of(self.sha256)

    @staticmethod
    def relative_path_of(sha256: str) -> str:
        """Where the blob of this content hash lives under MEDIA_ROOT (readers holding only a hash use it too)."""
        return f"blobs/{sha256[:2]}/{sha256[2:4]}/{sha256}"

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

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="screenshots")
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


class JudgeConfig(models.Model):
    """What makes two verdicts comparable: provider, model, prompt version and image policy."""

    provider = models.CharField(max_length=40)
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=100)
    image_policy = models.CharField(max_length=100, default="default")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "model", "prompt_version", "image_policy"],
                                    name="judge_config_unique"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def key(self) -> str:
        """A short name for command lines and URLs: provider:model:prompt:images."""
        return f"{self.provider}:{self.model}:{self.prompt_version}:{self.image_policy}"

    @property
    def is_offline_baseline(self) -> bool:
        return self.provider == "rules"


class Judgment(models.Model):
    """One judge config's verdict on one episode, with its per-part evidence and what it cost."""

    class Verdict(models.TextChoices):
        SUCCESS = "SUCCESS", "SUCCESS"
        NOT_SUCCESS = "NOT SUCCESS", "NOT SUCCESS"
        NONE = "NONE", "no verdict"

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="judgments")
    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="judgments")
    verdict = models.CharField(max_length=12, choices=Verdict.choices, default=Verdict.NONE)
    parts = models.JSONField(default=list, blank=True, help_text="[{part, done, evidence}]")
    raw_response = models.TextField(blank=True)
    error = models.TextField(blank=True)
    inconsistent = models.BooleanField(default=False, help_text="verdict disagrees with its own parts")
    unsupported_citations = models.PositiveSmallIntegerField(
        default=0, help_text="citations in its parts that point at nothing in the episode (taskgen/citations.py)")
    response_disagrees = models.BooleanField(
        default=False, help_text="imported: the response's own verdict differs from the file's predicted_label")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    image_bytes = models.PositiveBigIntegerField(default=0)
    request_hash = models.CharField(max_length=64, blank=True)
    source = models.CharField(max_length=20, default="judge", help_text="judge, or import of a <run>_judge dir")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "config"], name="judgment_unique_per_config")]
        indexes = [
            models.Index(fields=["config", "verdict"]),
            models.Index(fields=["config", "inconsistent"]),
            models.Index(fields=["request_hash"]),
            # The risky few (a verdict that contradicts its parts, a citation of nothing), found without walking a
            # run: the false-positive audit lists them first (3% of 100,000 episodes: 103 ms -> 13 ms).
            models.Index(fields=["episode"], condition=models.Q(inconsistent=True), name="judgment_inconsistent"),
            models.Index(fields=["episode"], condition=models.Q(unsupported_citations__gt=0),
                         name="judgment_unsupported"),
            # One config's verdicts joined to a run's table, from the index alone (see Episode's episode_run_rows).
            models.Index(fields=["config", "episode"], include=["verdict", "inconsistent", "unsupported_citations"],
                         name="judgment_config_rows"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id}:{self.config_id}:{self.verdict}"

    @property
    def predicted_label(self) -> int:
        """The reference's predicted_label: 1 for SUCCESS, else 0."""
        return int(self.verdict == self.Verdict.SUCCESS)

    @property
    def has_verdict(self) -> bool:
        return self.verdict != self.Verdict.NONE


class JudgeAnswer(models.Model):
    """A model's answer to a judge request, kept the moment it arrives, keyed by the request's hash, until its
    judgment is stored: a worker killed (or a database write lost) in between leaves it here, and the next try of
    the episode records it instead of paying for the call again (taskgen/stages/judge/service.py)."""

    request_hash = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200)
    text = models.TextField()
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.request_hash[:12]}:{self.model}"


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


class JudgeRateWindow(models.Model):
    """Calls made to one model in one minute, shared by every worker (the rate limit when there is no Redis)."""

    key = models.CharField(max_length=300, unique=True, help_text="<model>:<minute since the epoch>")
    count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key}={self.count}"


class JudgeBatchJob(models.Model):
    """One Gemini Batch API job a batch judge run submitted: the units of its episodes poll it until it ends."""

    class State(models.TextChoices):
        SUBMITTING = "submitting", "being sent"
        RUNNING = "running", "running"
        COLLECTED = "collected", "answers stored"
        ENDED = "ended", "ended without answers"

    pipeline_run = models.ForeignKey(PipelineRun, on_delete=models.CASCADE, related_name="judge_batch_jobs")
    name = models.CharField(max_length=300, blank=True, help_text="the job's name at Gemini (batches/...)")
    display_name = models.CharField(max_length=300, blank=True,
                                    help_text="the name it was sent under: how it is found again if its sender died")
    state = models.CharField(max_length=12, choices=State.choices, default=State.RUNNING)
    job_state = models.CharField(max_length=300, blank=True, help_text="Gemini's last word on it (JOB_STATE_...)")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"


class JudgeBatchRequest(models.Model):
    """One episode's request in a batch job: open until the episode's unit has taken the job's outcome (its
    judgment, the error of its answer, or the job's end), so a unit's next try submits it again."""

    job = models.ForeignKey(JudgeBatchJob, on_delete=models.CASCADE, related_name="requests")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="judge_batch_requests")
    request_hash = models.CharField(max_length=64, blank=True)
    image_bytes = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True, help_text="the error the job answered for this request")
    open = models.BooleanField(default=True)

    class Meta:
        indexes = [models.Index(fields=["episode", "open"])]

    def __str__(self) -> str:
        return f"episode {self.episode_id} in {self.job_id}"


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
