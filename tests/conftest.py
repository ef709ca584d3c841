"""Shared fixtures: users per role and logged-in clients."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory


@pytest.fixture(autouse=True, scope="session")
def _celery_app_loaded():
    """The app the engine's tasks are bound to, loaded in every test process: the app loads it when it sends its
    first message (taskgen/engine/send.py), and tests that replace a task's apply_async need the task bound first."""
    import taskgen.celery  # noqa: F401

# Under pytest-xdist (`-n 3 --dist loadgroup`) each worker has its own database, var folder and Redis database
# (tests/settings.py). The tests of a file that starts processes (Celery workers, the demo, gunicorn, a Redis of its
# own on a fixed port) or a Chromium for the whole module run on one worker, one after another: a module's worker or
# browser is started once, and a fixed port is never bound twice. Those files start first, the longest (a soak, the
# fault tests) before the rest, so that no long file is left to run alone at the end.
PROCESS_FILES = {"test_compose.py", "test_production.py", "test_judge_rate_limit.py", "test_login_without_redis.py",
                 "test_demo_serve.py", "test_demo_commands.py", "test_engine_faults.py", "test_engine_kill_recovery.py",
                 "test_engine_stage_faults.py"}


def _starts_processes(item) -> bool:
    return (item.path.name in PROCESS_FILES or item.get_closest_marker("celery_worker") is not None
            or item.get_closest_marker("browser") is not None)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if _starts_processes(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if config.getoption("dist", "no") != "no":
        items.sort(key=lambda item: (item.get_closest_marker("soak") is None, item.path.name != "test_engine_faults.py",
                                     not _starts_processes(item)))


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
