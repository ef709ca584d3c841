"""A request in a method its address does not take (a GET of the address a form posts to: a bookmark, a reload, a
link typed by hand) is answered 405 by Django with an empty body, which a browser shows as a blank page. This
middleware puts a page there, in the app's layout, that says what the address is for and where to go instead,
keeping the status and the Allow header. The sandbox websites answer as the sites they imitate: left as they are."""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class MethodNotAllowedPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.content or _in_the_sandbox(request):
            return response
        allowed = [method.strip() for method in response.get("Allow", "").split(",")
                   if method.strip() not in ("", "OPTIONS", "HEAD")]  # the ones a person would send
        page = render(request, "405.html", {"allowed": allowed, "method": request.method, "path": request.path},
                      status=405)
        page["Allow"] = response.get("Allow", "")
        return page


def _in_the_sandbox(request: HttpRequest) -> bool:
    match = getattr(request, "resolver_match", None)
    return match is not None and "sandbox" in match.app_names
