"""Settings from the environment, login everywhere, roles."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from taskgen import env
from tests.factories import EpisodeFactory


def test_env_bool_rejects_an_unclear_value(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG"):
        env.env_bool("X_FLAG")


def test_env_int_rejects_text_and_values_below_minimum(monkeypatch):
    monkeypatch.setenv("X_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="not a whole number"):
        env.env_int("X_N", 1)
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env.env_int("X_N", 1, minimum=1)


def test_env_secret_reads_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    monkeypatch.delenv("X_KEY", raising=False)
    monkeypatch.setenv("X_KEY_FILE", str(secret))
    assert env.env_secret("X_KEY") == "s3cret"


def test_env_secret_names_an_unreadable_file(monkeypatch, tmp_path):
    monkeypatch.delenv("X_KEY", raising=False)
    monkeypatch.setenv("X_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="X_KEY_FILE"):
        env.env_secret("X_KEY")


def test_redis_password_goes_into_redis_urls_that_name_none():
    assert env.redis_url_with_password("redis://redis:6379/0", "a/b@c") == "redis://:a%2Fb%40c@redis:6379/0"
    assert env.redis_url_with_password("rediss://u@h:1/2", "p") == "rediss://u:p@h:1/2"
    assert env.redis_url_with_password("redis://:own@h:1/0", "p") == "redis://:own@h:1/0"  # the URL's own wins
    assert env.redis_url_with_password("filesystem://", "p") == "filesystem://"
    assert env.redis_url_with_password("redis://h:1/0", "") == "redis://h:1/0"


@pytest.mark.django_db
@pytest.mark.parametrize("url_name", ["/", "/runs/1/", "/episodes/1/", "/blobs/" + "a" * 64 + "/"])
def test_anonymous_visitor_is_sent_to_login(client, url_name):
    response = client.get(url_name)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_user_without_a_role_is_refused(norole_client):
    assert norole_client.get("/").status_code == 403


@pytest.mark.django_db
def test_viewer_sees_runs_and_episodes(viewer_client):
    episode = EpisodeFactory()
    assert episode.run.name in viewer_client.get("/").content.decode()
    assert viewer_client.get(episode.run.get_absolute_url()).status_code == 200
    assert viewer_client.get(episode.get_absolute_url()).status_code == 200


@pytest.mark.django_db
def test_offline_banner_shows_without_a_key(viewer_client, settings):
    settings.GEMINI_API_KEY = ""
    assert "Offline mode" in viewer_client.get("/").content.decode()


@pytest.mark.parametrize("variable,value", [("TASKGEN_JUDGE_IMAGE_POLICY", "bogus"),
                                            ("TASKGEN_JUDGE_PROVIDER", "no-such-provider")])
def test_the_app_refuses_to_start_with_a_setting_that_names_nothing_it_knows(variable, value):
    """A value naming a policy or provider the app does not define stops every process at start, naming the
    variable (settings.py reads the environment only; taskgen/startup.py checks these names when Django starts)."""
    env = {**os.environ, variable: value, "DJANGO_SETTINGS_MODULE": "taskgen.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and variable in done.stderr and value in done.stderr
