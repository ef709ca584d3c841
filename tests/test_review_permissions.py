"""Who may do what on the review pages: anonymous, no role, viewer, reviewer, adjudicator, admin x every view."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from review.models import Queue
from review.services import queue_create_from_filters
from taskgen.models import Label
from tests.factories import EpisodeFactory, JudgmentFactory, UserFactory

pytestmark = pytest.mark.django_db

ROLES = [None, "viewer", "reviewer", "adjudicator", "admin"]
RANK = {r: n for n, r in enumerate(ROLES)}

# (name, method, url args key, form data, least role that may use it)
VIEWS = [
    ("review:episode_detail", "get", "episode", {}, "viewer"),
    ("review:queue_list", "get", None, {}, "viewer"),
    ("review:queue_detail", "get", "queue", {}, "viewer"),
    ("review:queue_progress", "get", "queue", {}, "viewer"),
    ("review:queue_previous", "get", "queue+episode", {}, "viewer"),
    ("review:adjudication", "get", None, {}, "adjudicator"),
    ("review:label_post", "post", "episode", {"verdict": "SUCCESS"}, "reviewer"),
    ("review:adjudicate_post", "post", "episode", {"verdict": "SUCCESS", "reason": "checked"}, "adjudicator"),
    ("review:queue_create", "post", None, {"name": "mine", "kind": "filter"}, "reviewer"),
    ("review:queue_from_episodes", "post", None, {"episode_ids": "EPISODE"}, "reviewer"),
    ("review:queue_next", "post", "queue", {}, "reviewer"),
    ("review:queue_release", "post", "queue", {}, "reviewer"),
]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def objects():
    episode = JudgmentFactory(verdict="SUCCESS", episode=EpisodeFactory()).episode
    return {"episode": episode, "queue": queue_create_from_filters(name="q", filters={}, user=None)}


def _url(name: str, args_key: str | None, objects: dict) -> str:
    if args_key is None:
        return reverse(name)
    if args_key == "queue+episode":
        return reverse(name, args=[objects["queue"].pk, objects["episode"].pk])
    return reverse(name, args=[objects[args_key].pk])


def _client(role: str | None, anonymous: bool = False) -> Client:
    client = Client()
    if not anonymous:
        user = UserFactory(username=f"perm-{role}", role=role if role != "admin" else None)
        if role == "admin":
            user.is_superuser = user.is_staff = True
            user.save()
        client.force_login(user)
    return client


@pytest.mark.parametrize(("name", "method", "args_key", "data", "least"), VIEWS, ids=[v[0] for v in VIEWS])
def test_permission_matrix(objects, name, method, args_key, data, least):
    url = _url(name, args_key, objects)
    data = {k: (str(objects["episode"].pk) if v == "EPISODE" else v) for k, v in data.items()}
    anonymous = getattr(_client(None, anonymous=True), method)(url, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    for role in ROLES:
        response = getattr(_client(role), method)(url, data)
        if RANK[role] >= RANK[least]:
            assert response.status_code in (200, 302), (role, response.status_code)
            assert not response.get("Location", "").startswith(reverse("login"))
        else:
            assert response.status_code == 403, (role, response.status_code)


@pytest.mark.parametrize(("name", "method", "args_key", "data", "least"), VIEWS, ids=[v[0] for v in VIEWS])
def test_each_view_refuses_the_other_method(objects, name, method, args_key, data, least):
    other = "post" if method == "get" else "get"
    response = getattr(_client("admin"), other)(_url(name, args_key, objects), data)
    assert response.status_code == 405


def test_a_viewer_sees_no_label_form_and_cannot_label(objects):
    client = _client("viewer")
    page = client.get(objects["episode"].get_absolute_url()).content.decode()
    assert 'id="label-form"' not in page and "needs the reviewer role" in page
    client.post(reverse("review:label_post", args=[objects["episode"].pk]), {"verdict": "SUCCESS"})
    assert not Label.objects.exists()


def test_posts_need_a_csrf_token(objects):
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(username="csrf-reviewer", role="reviewer"))
    response = client.post(reverse("review:label_post", args=[objects["episode"].pk]), {"verdict": "SUCCESS"})
    assert response.status_code == 403 and not Label.objects.exists()
    assert Queue.objects.count() == 1


def test_an_admin_can_add_a_reviewer_in_the_django_admin(objects):
    from django.contrib.auth.models import Group, User

    client = _client("admin")
    page = client.get(reverse("admin:auth_user_add")).content.decode()
    assert 'name="groups"' in page
    reviewer_group = Group.objects.get(name="reviewer")
    response = client.post(reverse("admin:auth_user_add"), {
        "username": "newbie", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9",
        "usable_password": "true", "groups": [reviewer_group.pk]})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert User.objects.get(username="newbie").groups.filter(name="reviewer").exists()


def test_a_refused_page_logs_one_line_and_no_traceback(norole_client, caplog):
    from django.urls import reverse

    with caplog.at_level("WARNING", logger="django.request"):
        response = norole_client.get(reverse("review:run_list"))
    assert response.status_code == 403 and "This page needs the viewer role." in response.content.decode()
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1 and records[0].exc_info is None and "Forbidden" in records[0].getMessage()


def test_every_page_names_its_icon_and_favicon_ico_finds_it(client, viewer_client):
    from django.urls import reverse

    assert 'rel="icon" href="/static/favicon.svg"' in viewer_client.get(reverse("review:run_list")).content.decode()
    response = client.get("/favicon.ico")  # no login needed for an icon
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
