"""Shared fixtures: users per role and logged-in clients."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory

# Under pytest-xdist (`-n 2 --dist loadgroup`) these run one after another on one worker: they start real Celery
# workers, bind fixed ports (tests/redis_server.py's servers, the compose file's Redis) or start the demo's and
# production's processes, and they stop, freeze or kill them on a clock. Every other test runs on whichever worker is
# free, each worker with its own database, var folder and Redis database (tests/settings.py).
ONE_AT_A_TIME = {"test_compose.py", "test_production.py", "test_judge_rate_limit.py", "test_login_without_redis.py",
                 "test_demo_serve.py", "test_demo_commands.py", "test_engine_faults.py", "test_engine_kill_recovery.py",
                 "test_engine_stage_faults.py", "test_chaos_soak.py"}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.path.name in ONE_AT_A_TIME or item.get_closest_marker("celery_worker"):
            item.add_marker(pytest.mark.xdist_group("one-at-a-time"))


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    """Every test writes blobs to its own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.DATA_ROOT = tmp_path / "data"
    # A slow password hash costs about a second per test user on this machine; tests do not need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _client_for(role: str | None, superuser: bool = False) -> Client:
    user = UserFactory(username=f"{role or 'norole'}-user", role=role)
    if superuser:
        user.is_superuser = True
        user.is_staff = True
        user.save()
    client = Client()
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def viewer_client(db) -> Client:
    return _client_for("viewer")


@pytest.fixture
def reviewer_client(db) -> Client:
    return _client_for("reviewer")


@pytest.fixture
def adjudicator_client(db) -> Client:
    return _client_for("adjudicator")


@pytest.fixture
def admin_client_role(db) -> Client:
    return _client_for("admin")


@pytest.fixture
def norole_client(db) -> Client:
    return _client_for(None)
