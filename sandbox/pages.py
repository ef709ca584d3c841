"""Reading a sandbox page in this process, as a browser in a session would see it, without a server: for the
proposer, which reads a site's pages to know what it holds. The page is rendered by its own view (resolved from its
path, given the session's cookie) and redirects are followed; nothing of the app's request stack is involved, and
reading changes nothing but the session's own request log.
"""
from __future__ import annotations

from django.http import HttpRequest, QueryDict
from django.http.response import HttpResponseRedirectBase
from django.urls import Resolver404, resolve

from sandbox.evidence import COOKIE

REDIRECTS_FOLLOWED = 5


class PageUnreadable(RuntimeError):
    """The path is no sandbox page, or the page answered with an error (the message says which)."""


def page_read(path: str, *, token: str) -> str:
    """The HTML of the sandbox page at `path` (with its query), as the session `token` sees it."""
    for _ in range(REDIRECTS_FOLLOWED + 1):
        response = _render(path, token)
        if isinstance(response, HttpResponseRedirectBase):
            path = response.url
            continue
        if response.status_code != 200:
            raise PageUnreadable(f"HTTP {response.status_code}")
        return response.content.decode(response.charset or "utf-8", errors="replace")
    raise PageUnreadable(f"more than {REDIRECTS_FOLLOWED} redirects")


def _render(path: str, token: str):
    route, _, query = path.partition("?")
    try:
        match = resolve(route)
    except Resolver404:
        raise PageUnreadable(f"{route} is no sandbox page") from None
    if not route.startswith("/sites/"):
        raise PageUnreadable(f"{route} is no sandbox page")
    request = HttpRequest()
    request.method, request.path, request.path_info = "GET", route, route
    request.GET = QueryDict(query)
    request.COOKIES[COOKIE] = token
    request.META.update({"SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80", "QUERY_STRING": query})
    return match.func(request, *match.args, **match.kwargs)
