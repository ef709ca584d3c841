"""Django admin for the pipeline's tables (read-mostly: the app's pages are where work happens)."""
from django.contrib import admin

from taskgen import models


@admin.register(models.Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "home_path"]
    search_fields = ["slug", "name"]


@admin.register(models.Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["task_id", "site", "task_kind", "source"]
    list_filter = ["task_kind", "source", "site"]
    search_fields = ["task_id", "instruction"]


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
