"""Production settings, served as production serves them: gunicorn on 127.0.0.1 with DEBUG off and a real secret key
serves the login page, a static file through whitenoise and a page behind login, with the security headers and the
CSP; `check --deploy` has nothing to say; failed logins are throttled; a 403 is one log line."""
from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from tests.factories import UserFactory
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def production_env(**extra: str) -> dict[str, str]:
    """The environment production runs with: DEBUG off, a real secret key, nothing else said about HTTPS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "GUNICORN_"))}
    env.update({"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", "TASKGEN_REQUIRE_SECRET_KEY": "1",
                "TASKGEN_LOG_FORMAT": "json", **extra})
    return env


def test_check_deploy_has_no_warnings_with_debug_off_and_a_real_secret_key():
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=production_env(DJANGO_ALLOWED_HOSTS="review.example.org"),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "no issues" in result.stdout, result.stdout + result.stderr


@pytest.fixture
def gunicorn(transactional_db, tmp_path):
    """`gunicorn -c gunicorn.conf.py taskgen.wsgi` (3 workers) on 127.0.0.1, on the test database, with static files
    collected as the image collects them."""
    port = free_port()
    env = production_env(GUNICORN_BIND=f"127.0.0.1:{port}", GUNICORN_WORKERS="2", DATABASE_URL=_database_url(),
                         TASKGEN_STATIC_ROOT=str(tmp_path / "static"), TASKGEN_MEDIA_ROOT=str(settings.MEDIA_ROOT))
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"], cwd=ROOT, env=env,
                   check=True, timeout=120)
    log = tmp_path / "gunicorn.log"
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "taskgen.wsgi"],
                               cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a loaded CI machine can take its time to import Django in each worker
    while time.monotonic() < deadline and process.poll() is None:
        try:
            requests.get(f"{base}/favicon.ico", timeout=15, allow_redirects=False)
            break
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.3)
    assert process.poll() is None, log.read_text()[-3000:]
    yield base, log
    process.terminate()
    process.wait(timeout=30)


def _cookies(response: requests.Response, jar: dict[str, str]) -> str:
    """Our own cookie jar: production cookies are Secure, and requests (rightly) keeps those off plain HTTP."""
    for name, value in re.findall(r"(?:^|, )(csrftoken|sessionid)=([^;]*)", response.headers.get("Set-Cookie", "")):
        jar[name] = value
    return "; ".join(f"{k}={v}" for k, v in jar.items())


SECURITY_HEADERS = {"Strict-Transport-Security": "max-age=31536000; includeSubDomains; preload",
                    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
                    "Referrer-Policy": "same-origin", "Cross-Origin-Opener-Policy": "same-origin"}


def _assert_hardened(response: requests.Response) -> None:
    for header, value in SECURITY_HEADERS.items():
        assert response.headers.get(header) == value, (header, response.headers.get(header))
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "style-src 'self'" in csp and "unsafe-inline" not in csp


def test_gunicorn_serves_the_app_with_production_settings(gunicorn):
    base, log = gunicorn
    viewer = UserFactory(username="prod-viewer", role="viewer")
    hasher = PBKDF2PasswordHasher()  # what production checks passwords with (the tests' own hasher is a fast MD5)
    viewer.password = hasher.encode("pw-for-tests", hasher.salt())
    viewer.save(update_fields=["password"])
    proxy = {"X-Forwarded-Proto": "https"}  # as the TLS proxy in front of gunicorn says
    plain = requests.get(f"{base}/accounts/login/", allow_redirects=False, timeout=30)
    assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")

    jar: dict[str, str] = {}
    login = requests.get(f"{base}/accounts/login/", headers=proxy, timeout=30)
    _assert_hardened(login)
    assert 'name="password"' in login.text and "Secure" in login.headers["Set-Cookie"]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    posted = requests.post(f"{base}/accounts/login/", allow_redirects=False, timeout=30,
                           data={"username": "prod-viewer", "password": "pw-for-tests", "csrfmiddlewaretoken": token},
                           headers={**proxy, "Cookie": _cookies(login, jar), "Origin": base.replace("http", "https")})
    assert posted.status_code == 302, posted.text[:500]
    assert re.search(r"sessionid=[^;]+;.*HttpOnly.*Secure|sessionid=[^;]+;.*Secure.*HttpOnly",
                     posted.headers["Set-Cookie"], re.I)

    page = requests.get(f"{base}/", headers={**proxy, "Cookie": _cookies(posted, jar)}, timeout=30)
    assert page.status_code == 200 and "Log out" in page.text
    _assert_hardened(page)
    css = requests.get(f"{base}/static/css/app.css", headers=proxy, timeout=30)
    assert css.status_code == 200 and "text/css" in css.headers["Content-Type"] and ".htmx-indicator" in css.text
    refused = requests.get(f"{base}{reverse('review:pipeline_list')}", headers={**proxy, "Cookie": _cookies(page, jar)},
                           timeout=30)
    assert refused.status_code == 403

    healthcheck = subprocess.run([sys.executable, "-m", "taskgen.healthcheck", f"{base}/accounts/login/"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=30)
    assert healthcheck.returncode == 0, healthcheck.stdout + healthcheck.stderr
    time.sleep(0.5)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    requests_logged = [line for line in lines if line["logger"] == "taskgen.request"]
    assert any(line["path"] == "/" and line["status"] == 200 and line["user"] == "prod-viewer"
               for line in requests_logged)
    about_403 = [line for line in log.read_text().splitlines() if "/pipeline/" in line]
    assert len(about_403) == 1 and '"status": 403' in about_403[0]  # one line, no traceback


THROTTLED_ADDRESS = "10.0.0.99"


def _login(client, username: str, password: str, **headers):
    return client.post(reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=headers.pop("REMOTE_ADDR", THROTTLED_ADDRESS), **headers)


def _window_passes() -> None:
    """Every failure counted so far is older than the window (what waiting 15 minutes does)."""
    window = timedelta(seconds=settings.LOGIN_FAILURE_WINDOW_SECONDS + 1)
    AccessAttempt.objects.update(attempt_time=timezone.now() - window)


@pytest.mark.django_db
def test_repeated_failed_logins_are_throttled_then_forgotten(client):
    UserFactory(username="throttled", role="viewer")
    for _ in range(settings.LOGIN_FAILURE_LIMIT - 1):
        assert _login(client, "throttled", "wrong").status_code == 200
    assert _login(client, "throttled", "wrong").status_code == 429  # the failure that reaches the limit
    refused = _login(client, "throttled", "pw-for-tests")
    assert refused.status_code == 429 and "Too many failed logins" in refused.content.decode()
    assert not refused.wsgi_request.user.is_authenticated  # the right password is not even checked
    _window_passes()
    assert _login(client, "throttled", "pw-for-tests").status_code == 302


@pytest.mark.django_db
def test_a_username_is_counted_whatever_its_case_and_a_success_clears_it(client):
    UserFactory(username="throttled", role="viewer")
    for n in range(settings.LOGIN_FAILURE_LIMIT - 1):
        _login(client, "Throttled " if n % 2 else "throttled", "wrong", REMOTE_ADDR=f"10.0.1.{n}")
    assert _login(client, "throttled", "wrong", REMOTE_ADDR="10.0.2.1").status_code == 429
    _window_passes()
    for n in range(settings.LOGIN_FAILURE_LIMIT - 1):
        _login(client, "throttled", "wrong", REMOTE_ADDR=f"10.0.3.{n}")
    assert _login(client, "throttled", "pw-for-tests", REMOTE_ADDR="10.0.4.1").status_code == 302
    client.logout()
    for n in range(settings.LOGIN_FAILURE_LIMIT - 1):  # the success cleared the name's failures
        assert _login(client, "throttled", "wrong", REMOTE_ADDR=f"10.0.5.{n}").status_code == 200


@pytest.mark.django_db
def test_one_address_guessing_many_names_is_throttled_too(client):
    for n in range(settings.LOGIN_FAILURE_LIMIT):
        _login(client, "throttled" if n % 2 else "other", "wrong")
    assert _login(client, "someone-else", "x").status_code == 429


@pytest.mark.django_db
def test_behind_the_proxy_each_client_is_counted_by_the_address_the_proxy_saw(client, settings):
    settings.BEHIND_PROXY = True
    for _ in range(settings.LOGIN_FAILURE_LIMIT):  # one guesser, through the proxy at THROTTLED_ADDRESS
        _login(client, f"guess-{_}", "x", HTTP_X_FORWARDED_FOR="6.6.6.6, 10.0.0.1")
    guesser = _login(client, "g", "x", HTTP_X_FORWARDED_FOR="10.0.0.1")
    someone_else = _login(client, "h", "x", HTTP_X_FORWARDED_FOR="10.0.0.2")
    assert guesser.status_code == 429 and someone_else.status_code == 200
