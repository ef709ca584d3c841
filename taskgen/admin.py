"""Django admin for the pipeline's tables (read-mostly: the app's pages are where work happens)."""
from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone

from review.pipeline_summary import sentence, started_words
from taskgen import models
from taskgen.engine.contract import NothingToDo
from taskgen.roles import Role, has_role
from taskgen.stages.begin import stage_start
from taskgen.stages.judge.prompt import judge_prompt


@admin.register(models.Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "home_path"]
    search_fields = ["slug", "name"]


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["task_id", "site", "task_kind", "source", "review_state"]
    list_filter = ["task_kind", "source", "review_state", "site"]
    search_fields = ["task_id", "instruction"]
    # A task's review is changed on the Tasks page, where every change is kept with who and when (TaskEdit).
    readonly_fields = ["instruction", "task_kind", "review_state", "review_flag", "grounding_note", "proposal_batch"]


@admin.register(models.ProposalBatch)
class ProposalBatchAdmin(admin.ModelAdmin):
    list_display = ["id", "site", "pipeline_run", "index", "provider", "model", "kept", "duplicates", "invalid"]
    list_filter = ["provider", "site"]
    raw_id_fields = ["pipeline_run", "site"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # what a proposer was shown and answered is a record


@admin.register(models.TaskEdit)
class TaskEditAdmin(admin.ModelAdmin):
    list_display = ["task", "action", "user", "at"]
    list_filter = ["action"]
    raw_id_fields = ["task", "user"]

    def has_add_permission(self, request) -> bool:
        return False  # history is written only by the Tasks page's changes

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["name", "origin", "agent", "created_at"]
    search_fields = ["name"]


@admin.register(models.Episode)
class EpisodeAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "task", "site", "status", "steps"]
    list_filter = ["status", "run", "site"]
    raw_id_fields = ["run", "task", "site"]
    search_fields = ["task__task_id"]


@admin.register(models.JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    list_display = ["provider", "model", "prompt_version", "image_policy"]


@admin.register(models.Judgment)
class JudgmentAdmin(admin.ModelAdmin):
    list_display = ["id", "episode", "config", "verdict", "inconsistent", "cost_usd"]
    list_filter = ["verdict", "inconsistent", "config"]
    raw_id_fields = ["episode"]


@admin.register(models.PipelineRun)
class PipelineRunAdmin(admin.ModelAdmin):
    list_display = ["id", "stage", "status", "done", "total", "failed", "started_by", "created_at"]
    list_filter = ["stage", "status"]


@admin.register(models.Export)
class ExportAdmin(admin.ModelAdmin):
    list_display = ["id", "selection", "budget", "created_by", "created_at"]


# ── stage starts as admin actions (the same starts as the pipeline page) ─────────────────────────────────────────

def _start_from_admin(modeladmin: admin.ModelAdmin, request, stage: str, params: dict) -> None:
    if not has_role(request.user, Role.ADMIN):
        modeladmin.message_user(request, "Starting pipeline stages needs the admin role.", messages.ERROR)
        return
    try:
        pipeline_run = stage_start(stage=stage, params=params, user=request.user)
    except NothingToDo as nothing:  # said, and no run is made for it
        modeladmin.message_user(request, sentence(str(nothing)), messages.INFO)
        return
    except Exception as exc:  # shown to the admin as it is, so a bad start never fails silently
        modeladmin.message_user(request, f"{stage} not started: {exc}", messages.ERROR)
        return
    started, words = started_words(pipeline_run)
    modeladmin.message_user(request, f"{words} {pipeline_run.get_absolute_url()}",
                            messages.SUCCESS if started else messages.INFO)


def _default_judge_params(run_pk: int) -> dict:
    # No model or image policy named here: the judge takes its provider's own defaults (a Gemini name or
    # media_resolution policy would be wrong for openai).
    return {"run": run_pk, "provider": settings.JUDGE_PROVIDER, "model": "",
            "prompt_version": judge_prompt().version, "image_policy": "", "batch": False}


@admin.action(description="Judge with the default judge (settings' provider and model)")
def judge_runs(modeladmin, request, queryset) -> None:
    for run in queryset:
        _start_from_admin(modeladmin, request, "judge", _default_judge_params(run.pk))


@admin.action(description="Re-import from the run dir it came from (only changed episodes are read again)")
def reimport_runs(modeladmin, request, queryset) -> None:
    for run in queryset:
        _start_from_admin(modeladmin, request, "import", {"run_dir": run.source_dir, "tasks_file": run.tasks_file,
                                                          "name": run.name})


@admin.action(description="Export final human labels' rows to exports/<run>-<time> under the data root")
def export_human_rows(modeladmin, request, queryset) -> None:
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    for run in queryset:
        _start_from_admin(modeladmin, request, "export", {
            "run": run.pk, "source": "human", "judge_config": None, "budget": settings.EXPORT_BUDGET,
            "out_dir": f"exports/{run.name}-{stamp}"})


@admin.action(description="Judge the runs of the selected episodes with the default judge")
def judge_episode_runs(modeladmin, request, queryset) -> None:
    for run_pk in queryset.values_list("run_id", flat=True).distinct():
        _start_from_admin(modeladmin, request, "judge", _default_judge_params(run_pk))


RunAdmin.actions = [judge_runs, reimport_runs, export_human_rows]
EpisodeAdmin.actions = [judge_episode_runs]
