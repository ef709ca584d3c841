"""Template context every page gets: which judge provider is live, so offline mode is said on screen."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def app_context(request: HttpRequest) -> dict:
    """Whether the app runs on its offline providers (no GEMINI_API_KEY), for the banner in base.html."""
    return {
        "offline_mode": not settings.GEMINI_API_KEY,
        "judge_provider": settings.JUDGE_PROVIDER,
    }
