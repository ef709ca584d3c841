"""The Content-Security-Policy header: every page's scripts and styles come from static files, none inline.

Django 5.2 has no CSP of its own; this middleware sets settings.CONTENT_SECURITY_POLICY on every response that has
none yet. The policy allows no inline script or style, so text from a website or a model cannot run or restyle a
page even if it ever escaped the templates' escaping.
"""
from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


def csp_header_value(directives: dict[str, str]) -> str:
    """The header's text from a {directive: sources} mapping, in the mapping's order."""
    return "; ".join(f"{name} {sources}".strip() for name, sources in directives.items())


class ContentSecurityPolicyMiddleware:
    """Adds the CSP header (unless a view set its own)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.value = csp_header_value(settings.CONTENT_SECURITY_POLICY)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.value and HEADER not in response:
            response[HEADER] = self.value
        return response
