"""The Content-Security-Policy (django-csp): every answer the app gives, its pages, the login page, the sandbox
sites, a refusal, a missing page and a static file, carries the one policy, no inline script or style anywhere."""
from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import Client, RequestFactory, override_settings

from tests.factories import RunFactory

POLICY = {"default-src": {"'self'"}, "script-src": {"'self'"}, "style-src": {"'self'"}, "img-src": {"'self'", "data:"},
          "font-src": {"'self'"}, "connect-src": {"'self'"}, "object-src": {"'none'"}, "base-uri": {"'self'"},
          "form-action": {"'self'"}, "frame-ancestors": {"'none'"}}


def _directives(header: str) -> dict[str, set[str]]:
    parts = [part.split() for part in header.split(";") if part.strip()]
    return {name: set(sources) for name, *sources in parts}


def _assert_policy(response) -> None:
    assert _directives(response["Content-Security-Policy"]) == POLICY, response.wsgi_request.path


@pytest.mark.django_db
def test_every_kind_of_answer_carries_the_whole_policy(reviewer_client, norole_client):
    run = RunFactory(name="csp-header-run")
    for path in ("/", run.get_absolute_url(), "/pipeline/", "/sites/", "/static/css/app.css", "/no-such-page/"):
        _assert_policy(reviewer_client.get(path))
    _assert_policy(Client().get("/accounts/login/"))
    _assert_policy(Client().get("/"))  # the redirect to the login page
    _assert_policy(norole_client.get(run.get_absolute_url()))  # refused: no role


@pytest.mark.django_db
def test_the_sandbox_sites_serve_under_the_same_policy(reviewer_client):
    reviewer_client.post("/sites/enter/")
    for path in ("/sites/shop/", "/sites/mail/", "/sites/booking/"):
        response = reviewer_client.get(path)
        assert response.status_code == 200, path
        _assert_policy(response)


@override_settings(DEBUG=False)
def test_a_view_that_sets_its_own_policy_keeps_it():
    from csp.middleware import CSPMiddleware

    def own(request):
        response = HttpResponse("x")
        response["Content-Security-Policy"] = "default-src 'none'"
        return response

    response = CSPMiddleware(own)(RequestFactory().get("/x/"))
    assert response["Content-Security-Policy"] == "default-src 'none'"
