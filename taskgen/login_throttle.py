"""Login throttling: after too many failed logins for one username or from one address, the login form answers
429 for a while without checking any password. Counts live in the cache (Redis in production), so every web
worker shares them.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str:
    """The client's address: behind the TLS proxy, the one the proxy appended to X-Forwarded-For (the last; what
    comes before it is the client's own say), else the connection's. Without this, every client would share the
    proxy's address and one guesser would lock everyone out."""
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if settings.BEHIND_PROXY and forwarded:
        return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")


def _keys(request: HttpRequest) -> list[str]:
    username = request.POST.get("username", "").strip().lower()[:150]
    return [f"login-fail:user:{username}", f"login-fail:addr:{client_address(request)}"]


def login_throttled(request: HttpRequest) -> bool:
    """True when this username or this address has failed LOGIN_FAILURE_LIMIT times within the window."""
    counts = cache.get_many(_keys(request))
    return any(count >= settings.LOGIN_FAILURE_LIMIT for count in counts.values())


def login_failure_count(request: HttpRequest) -> None:
    """Count one failed login for the username and the address; each count expires after the window."""
    for key in _keys(request):
        if cache.add(key, 1, settings.LOGIN_FAILURE_WINDOW_SECONDS):
            continue
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, settings.LOGIN_FAILURE_WINDOW_SECONDS)


def login_failures_forget(request: HttpRequest) -> None:
    """A successful login clears its username's count (the address's stays: it may be guessing other names)."""
    cache.delete(_keys(request)[0])


class ThrottledLoginView(auth_views.LoginView):
    """Django's login view, refusing posts for a while after repeated failures."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if login_throttled(request):
            minutes = max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60)
            return render(request, "registration/login_throttled.html", {"minutes": minutes}, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        login_failure_count(self.request)
        return super().form_invalid(form)

    def form_valid(self, form) -> HttpResponse:
        login_failures_forget(self.request)
        return super().form_valid(form)
