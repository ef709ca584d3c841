"""Judge configs and their judgments (one per episode and config), the answers kept the moment they arrive, the
shared rate window and the Gemini Batch API's jobs and requests."""
from __future__ import annotations

from django.db import models

from taskgen.models.episodes import Episode
from taskgen.providers import provider_can


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
        return provider_can(self.provider, "offline")


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
            # The first judgment of the very same request (the judge's cache, at every judgment), read in id order
            # from the index: on (request_hash) alone, a table without statistics yet (just filled, as by an import
            # or a first run) was walked by id instead, 7 ms per judgment at 18,000 judgments, and growing.
            models.Index(fields=["request_hash", "id"], name="judgment_request_first"),
            # The risky few (a verdict that contradicts its parts, a citation of nothing), found without walking a
            # run: the false-positive audit lists them first (3% of 100,000 episodes: 103 ms -> 13 ms).
            models.Index(fields=["episode"], condition=models.Q(inconsistent=True), name="judgment_inconsistent"),
            models.Index(fields=["episode"], condition=models.Q(unsupported_citations__gt=0),
                         name="judgment_unsupported"),
            # The judged successes of any config (the false-positive audit's scope and its progress counts) merged
            # with a run's episodes from the index alone, not a hash of every judgment (a million episodes, half
            # judged successes: the progress counts' CPU 800 ms -> 220 ms on a busy machine).
            models.Index(fields=["episode"], condition=models.Q(verdict="SUCCESS"), name="judgment_success"),
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

    pipeline_run = models.ForeignKey("PipelineRun", on_delete=models.CASCADE, related_name="judge_batch_jobs")
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
