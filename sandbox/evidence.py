"""Binding sandbox pages to a session and recording each request as a DESIGN.md log entry.

Why the sandbox pages skip the app's login: they stand in for the external websites an agent visits, so an agent
never logs into Taskgen Review. Instead every sandbox page needs a valid session token (cookie `tg_sandbox`)
that only the harness mints (or an admin, from the sandbox index page); without one the page is a 403 that
touches nothing. A session can only read and write its own sandbox state, never the app's tables.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from sandbox.models import SandboxSession
from sandbox.state import SiteState

COOKIE = "tg_sandbox"
SECRET_FIELDS = {"csrfmiddlewaretoken", "csrf_token"}
MAX_LOG = 2000


def log_entry(request: HttpRequest, status: int) -> dict:
    """{method, path, query, body, status}; the body without the CSRF token, one value per field."""
    query = {k: request.GET.get(k) for k in request.GET}
    body = {k: request.POST.get(k) for k in request.POST if k not in SECRET_FIELDS} if request.method == "POST" else {}
    return {"method": request.method, "path": request.path, "query": query, "body": body, "status": status}


def _no_session(request: HttpRequest) -> HttpResponse:
    return render(request, "sandbox/no_session.html", status=403)


def sandbox_view(site: str) -> Callable:
    """Decorator for a sandbox page: the view gets the session's SiteState; the request is logged after it runs."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_not_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            token = request.COOKIES.get(COOKIE, "")
            with transaction.atomic():
                # Row lock: one browser's requests to its session are applied one at a time.
                session = SandboxSession.objects.select_for_update().filter(token=token).first() if token else None
                if session is None:
                    return _no_session(request)
                state = SiteState.of_session(session, site)
                response = _run_view(view, request, state, *args, **kwargs)
                session.log = (session.log + [log_entry(request, response.status_code)])[-MAX_LOG:]
                session.save(update_fields=["state", "log", "changes", "updated_at"])
            return response

        return wrapped

    return decorator


def _run_view(view: Callable, request: HttpRequest, state: SiteState, *args, **kwargs) -> HttpResponse:
    """The view's response; a missing item is a logged 404 page rather than an exception that loses the log."""
    try:
        return view(request, state, *args, **kwargs)
    except Http404 as exc:
        return render(request, "sandbox/not_found.html", {"site": state.site, "message": str(exc)}, status=404)
