"""Login throttling, by django-axes (its database handler): after LOGIN_FAILURE_LIMIT failed logins for one username
or from one address, the login form answers 429 until LOGIN_FAILURE_WINDOW_SECONDS have passed since the last
failure, without checking any password. The counts live in the database, so every web worker shares them and a
login never waits on Redis (its outage used to fail every login). This module holds what axes asks the app for:
the client's address behind the proxy, the username as counted, and the page of a refused login.
"""
from __future__ import annotations

from axes.utils import reset as axes_reset
from django.conf import settings
from django.contrib.auth import views as auth_views
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


def login_username(request: HttpRequest, credentials: dict | None = None) -> str:
    """The username a failure is counted for: trimmed and lower-cased, so "Alice " and "alice" share one count."""
    given = (credentials or {}).get("username") or getattr(request, "POST", {}).get("username") or ""
    return str(given).strip().lower()[:150]


def login_refused(request: HttpRequest, response: HttpResponse | None = None,
                  credentials: dict | None = None) -> HttpResponse:
    """The page a throttled login gets (axes' lockout response): 429, saying for how long."""
    minutes = max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60)
    return render(request, "registration/login_throttled.html", {"minutes": minutes}, status=429)


class ThrottledLoginView(auth_views.LoginView):
    """Django's login view; axes refuses it after repeated failures (its backend and middleware). A successful
    login clears its username's failures (the address's others stay: it may be guessing other names)."""

    def form_valid(self, form) -> HttpResponse:
        axes_reset(username=login_username(self.request))
        return super().form_valid(form)
