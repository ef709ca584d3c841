"""Django admin for labels; reviewers are added as users in the `reviewer` group (no invite needed)."""
from django.contrib import admin

from review import models


@admin.register(models.Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["episode", "reviewer", "verdict", "updated_at"]
    list_filter = ["verdict"]
    raw_id_fields = ["episode"]


@admin.register(models.FinalLabel)
class FinalLabelAdmin(admin.ModelAdmin):
    list_display = ["episode", "verdict", "adjudicated", "decided_by"]
    raw_id_fields = ["episode"]
