"""One sandbox session per episode: its own copy of the sites' data and the evidence of what it did.

The harness mints a session for each episode and binds it to the browser with a cookie; every sandbox request
reads and writes only that session's state, so parallel episodes never see each other's changes.
"""
from __future__ import annotations

import secrets

from django.db import models


def new_token() -> str:
    return secrets.token_urlsafe(24)


class SandboxSession(models.Model):
    """A fresh copy of the sandbox sites' data (seeded lazily per site) plus its request log and data changes."""

    token = models.CharField(max_length=64, unique=True, default=new_token)
    label = models.CharField(max_length=200, blank=True, help_text="who minted it, e.g. the run and task id")
    state = models.JSONField(default=dict, blank=True, help_text="{site slug: {collection: [rows]}}")
    log = models.JSONField(default=list, blank=True, help_text="[{method, path, query, body, status}]")
    changes = models.JSONField(default=list, blank=True, help_text="[{collection, op, before, after, changed}]")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.label or self.token[:8]
