"""The app's own page about the sandbox: which sites exist, and a button to browse them in a fresh session."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from sandbox.evidence import COOKIE
from sandbox.models import SandboxSession
from sandbox.seed import SITES
from taskgen.roles import Role, require_role


@require_GET
@require_role(Role.VIEWER)
def sandbox_index(request: HttpRequest) -> HttpResponse:
    sites = [{"slug": slug, "name": name, "home": f"/sites/{slug}/"} for slug, name in SITES.items()]
    has_session = SandboxSession.objects.filter(token=request.COOKIES.get(COOKIE, "-")).exists()
    return render(request, "sandbox/index.html", {"sites": sites, "has_session": has_session})


@require_POST
@require_role(Role.REVIEWER)
def session_enter(request: HttpRequest) -> HttpResponse:
    """Mint a fresh sandbox session for this browser, so a person can try the sites as an agent would."""
    session = SandboxSession.objects.create(label=f"browsed by {request.user.get_username()}")
    response = redirect("sandbox:index")
    response.set_cookie(COOKIE, session.token, httponly=True, samesite="Lax", path="/sites/")
    return response
