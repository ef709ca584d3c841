"""Django admin for labels; reviewers are added as users in the `reviewer` group (no invite needed)."""
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

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


@admin.register(models.Queue)
class QueueAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "builtin", "labels_needed", "blind", "created_by"]
    list_filter = ["kind", "builtin", "blind"]


# Invite-free onboarding: the "add user" form asks for the role group at once (viewer, reviewer, adjudicator, admin).
admin.site.unregister(User)


@admin.register(User)
class UserWithRoleAdmin(UserAdmin):
    add_fieldsets = (
        (None, {"classes": ("wide",), "fields": ("username", "usable_password", "password1", "password2")}),
        ("Role", {"description": "Put a reviewer in the reviewer group; a viewer only reads.", "fields": ("groups",)}),
    )
