"""Shared fixtures: users per role and logged-in clients."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.factories import UserFactory


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
