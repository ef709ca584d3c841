"""Django admin for the review side: labels and their history are read-only here; reviewers are added as users in
the `reviewer` group (no invite needed)."""
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User

from review import models
from taskgen.models import FinalLabel, FinalLabelChange, Label, LabelChange


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never written: labels and final labels change only through `review.services` (the label and
    adjudication forms of the episode page), which keep their history and the final-label rule."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class LabelChangeInline(admin.TabularInline):
    model = LabelChange
    fields = ["changed_at", "changed_by", "before", "after"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Label)
class LabelAdmin(ReadOnlyAdmin):
    list_display = ["episode", "reviewer", "verdict", "updated_at"]
    list_filter = ["verdict"]
    raw_id_fields = ["episode"]
    inlines = [LabelChangeInline]


@admin.register(LabelChange)
class LabelChangeAdmin(ReadOnlyAdmin):
    list_display = ["label", "changed_by", "changed_at"]


@admin.register(FinalLabel)
class FinalLabelAdmin(ReadOnlyAdmin):
    list_display = ["episode", "verdict", "adjudicated", "decided_by"]
    raw_id_fields = ["episode"]


@admin.register(FinalLabelChange)
class FinalLabelChangeAdmin(ReadOnlyAdmin):
    list_display = ["episode", "changed_by", "changed_at"]


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
