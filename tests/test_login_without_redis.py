"""Login while Redis is down or frozen: the episode pages, label posts and the pipeline ride out an outage of Redis,
so logging in must too. A redis-server of our own (another port) is the app's cache and broker here; it is killed
(connections refused) or frozen with SIGSTOP (connections hang), and a login must still answer, and still be
throttled after repeated failures (the counts live in the database, django-axes)."""
from __future__ import annotations

import threading

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory
from tests.redis_server import RedisServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def redis_as_cache(tmp_path, settings):
    """The app's cache on a Redis of our own, as production configures it (taskgen/settings.py)."""
    server = RedisServer(None, tmp_path).start()
    settings.CACHES = {"default": {**django_settings.CACHES["default"],
                                   "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url}}
    settings.REDIS_URL = server.url
    yield server
    if server.running:
        server.thaw()
        server.kill()


def _login_answers(username: str, password: str, address: str = "10.1.2.3"):
    """Post the login form from a thread; its response, or None when it did not answer within 30 s (it hung)."""
    answered = []

    def post() -> None:
        try:
            answered.append(Client().post(reverse("login"), {"username": username, "password": password},
                                          REMOTE_ADDR=address))
        finally:
            connection.close()

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    thread.join(30)
    return answered[0] if answered else None


@pytest.mark.parametrize("outage", ["refused", "frozen"])
def test_login_answers_while_redis_is_down(redis_as_cache, outage):
    UserFactory(username="reviewer-a", role="reviewer")
    redis_as_cache.kill() if outage == "refused" else redis_as_cache.freeze()
    response = _login_answers("reviewer-a", "pw-for-tests")
    assert response is not None, "the login did not answer"
    assert response.status_code == 302 and response.url == "/"


@pytest.mark.parametrize("outage", ["refused", "frozen"])
def test_failed_logins_are_still_throttled_while_redis_is_down(redis_as_cache, outage):
    UserFactory(username="reviewer-b", role="reviewer")
    redis_as_cache.kill() if outage == "refused" else redis_as_cache.freeze()
    for _ in range(django_settings.LOGIN_FAILURE_LIMIT - 1):
        wrong = _login_answers("reviewer-b", "wrong", address="10.1.2.4")
        assert wrong is not None and wrong.status_code == 200
    last = _login_answers("reviewer-b", "wrong", address="10.1.2.4")
    assert last is not None and last.status_code == 429  # the failure that reaches the limit says so at once
    refused = _login_answers("reviewer-b", "pw-for-tests", address="10.1.2.4")
    assert refused is not None and refused.status_code == 429
