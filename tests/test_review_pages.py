"""The episode workbench page, label posts (htmx and plain), blind mode, adjudication, and fixed query counts."""
from __future__ import annotations

import io

import pytest
from django.urls import reverse
from PIL import Image

from review.models import Queue
from review.services import label_set, queue_create_from_filters
from taskgen.blobs import blob_store_image
from taskgen.labels.rule import UNSURE_RULE
from taskgen.models import FinalLabel, Label, Screenshot
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Many users per test: hashing each password properly would take most of the test's time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOG = [
    {"method": "GET", "path": "/sites/shop/", "query": {}, "body": None, "status": 200},
    {"method": "GET", "path": "/static/app.css", "query": {}, "body": None, "status": 200},
    {"method": "POST", "path": "/sites/shop/cart/add", "query": {}, "body": {"item": "lamp", "csrf_token": "SECRET1"},
     "status": 302},
]
CHANGES = [{"collection": "cart_items", "op": "create", "before": None, "after": {"id": 4, "name": "lamp", "qty": 2}}]


def _png(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(buf, "PNG")
    return buf.getvalue()


def _rich_episode(n_shots=2, n_log=1, n_labels=0, run=None):
    episode = EpisodeFactory(run=run or RunFactory(), request_log=LOG * n_log, data_changes=CHANGES,
                             screen_text=["first", "Cart: lamp x2"],
                             actions=[{"click": {"index": 1}}, {"type": {"text": "lamp"}}, {"done": {}}])
    for n in range(n_shots):
        Screenshot.objects.create(episode=episode, step=n, name=f"step_{n}.png",
                                  blob=blob_store_image(data=_png(["red", "blue", "green"][n % 3] if n < 3 else
                                                                  (n, n, n))))
    parts = [{"part": "add the lamp", "done": True, "evidence": "POST /sites/shop/cart/add; cart_items created"},
             {"part": "report total", "done": False, "evidence": "answer gives no total"}]
    JudgmentFactory(episode=episode, verdict="SUCCESS", parts=parts, inconsistent=True)
    JudgmentFactory(episode=episode, config=JudgeConfigFactory(provider="gemini", model="gemini-x"),
                    verdict="NOT SUCCESS", parts=parts[1:])
    for _ in range(n_labels):
        label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS", note="ok")
    return episode


def test_episode_page_shows_the_evidence_beside_the_judges(viewer_client):
    episode = _rich_episode()
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert 'id="req-2" class="write cited"' in html          # the POST stands out and is cited by the evidence
    assert 'id="req-1" class="noise"' in html                 # static noise is marked, hidden by CSS
    assert 'href="#req-2"' in html and 'href="#chg-0"' in html  # evidence links to the request and the change
    assert 'href="#req-0"' not in html                         # /sites/shop/ is only a prefix of the cited path
    assert "SECRET1" not in html                              # csrf tokens are not shown
    assert "gemini:gemini-x" in html and "rules baseline, not a model" in html
    assert "inconsistent with its parts" in html
    assert "step_1.png" in html and "/thumb/" in html
    assert "Cart: lamp x2" in html and "type {&quot;text&quot;: &quot;lamp&quot;}" in html


def test_untrusted_markup_is_escaped_everywhere(viewer_client):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    episode = EpisodeFactory(answer=evil, screen_text=[evil], actions=[{evil: {"x": evil}}],
                             request_log=[{"method": "GET", "path": evil, "query": {"q": evil}, "status": 200}],
                             data_changes=[{"collection": evil, "before": {}, "after": {"name": evil}}])
    JudgmentFactory(episode=episode, parts=[{"part": evil, "done": True, "evidence": evil}])
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_label_post_from_htmx_returns_the_panel_and_a_plain_post_redirects(reviewer_client):
    episode = _rich_episode()
    url = reverse("review:label_post", args=[episode.pk])
    form = {"verdict": "NOT SUCCESS", "part_overrides": ["0"], "note": "no total", "tags": "wrong answer accepted"}
    response = reviewer_client.post(url, form, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="label-panel"' in response.content.decode()
    assert "<html" not in response.content.decode()
    response = reviewer_client.post(url, {**form, "verdict": "UNSURE"})
    assert response.status_code == 302 and response["Location"] == episode.get_absolute_url()
    label = Label.objects.get(episode=episode)
    assert (label.verdict, label.part_overrides, label.tags) == ("UNSURE", [0], ["wrong answer accepted"])
    assert label.changes.count() == 2
    page = reviewer_client.get(episode.get_absolute_url()).content.decode()
    assert "History (2 changes)" in page


def test_a_bad_label_post_says_why_and_saves_nothing(reviewer_client):
    episode = _rich_episode()
    response = reviewer_client.post(reverse("review:label_post", args=[episode.pk]), {"verdict": "maybe"},
                                    HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'role="alert">unknown verdict' in response.content.decode()
    assert not Label.objects.exists()


def test_blind_queue_hides_the_judge_and_other_labels_until_you_label(reviewer_client):
    episode = _rich_episode()
    label_set(episode=episode, reviewer=UserFactory(username="zed", role="reviewer"), verdict="SUCCESS")
    queue = queue_create_from_filters(name="blind", filters={}, user=None, blind=True, labels_needed=2)
    url = f"{episode.get_absolute_url()}?queue={queue.pk}"
    html = reviewer_client.get(url).content.decode()
    assert "Blind review" in html and "gemini:gemini-x" not in html and "zed" not in html
    response = reviewer_client.post(reverse("review:label_post", args=[episode.pk]),
                                    {"verdict": "SUCCESS", "queue": queue.pk}, HTTP_HX_REQUEST="true")
    revealed = response.content.decode()
    assert 'hx-swap-oob="true"' in revealed and "gemini:gemini-x" in revealed and "zed" in revealed
    assert "gemini:gemini-x" in reviewer_client.get(url).content.decode()


def test_adjudicator_settles_a_disagreement_from_the_adjudication_list(adjudicator_client):
    episode = _rich_episode()
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="NOT SUCCESS")
    listed = adjudicator_client.get(reverse("review:adjudication")).content.decode()
    why = "The labels disagree (1 success, 1 not success): an adjudicator decides."
    assert episode.task.task_id in listed and why in listed
    assert why in adjudicator_client.get(episode.get_absolute_url()).content.decode()  # one rule, the same words
    adjudicator_client.post(reverse("review:adjudicate_post", args=[episode.pk]),
                            {"verdict": "NOT SUCCESS", "reason": "cart total never reported"})
    final = FinalLabel.objects.get(episode=episode)
    assert final.adjudicated and final.decided_by == adjudicator_client.user
    assert episode.task.task_id not in adjudicator_client.get(reverse("review:adjudication")).content.decode()


def test_queue_pages_show_progress_and_next_opens_a_reserved_item(reviewer_client):
    episode = _rich_episode()
    page = reviewer_client.get(reverse("review:queue_list")).content.decode()
    assert "False-positive audit" in page
    queue = Queue.objects.get(kind=Queue.Kind.FALSE_POSITIVE)
    progress = reviewer_client.get(reverse("review:queue_progress", args=[queue.pk])).content.decode()
    assert "<strong>0</strong> of 1 done (0%), 1 left" in progress
    response = reviewer_client.post(reverse("review:queue_next", args=[queue.pk]))
    assert response["Location"] == f"{episode.get_absolute_url()}?queue={queue.pk}"
    assert "reviewer-user" in reviewer_client.get(queue.get_absolute_url()).content.decode()  # reserved by
    assert "reserved for you until" in reviewer_client.get(response["Location"]).content.decode()


def test_queue_create_from_the_form(reviewer_client):
    episode = _rich_episode()
    response = reviewer_client.post(reverse("review:queue_create"), {
        "name": "shop successes", "kind": "filter", "sites": episode.site.slug, "verdicts": ["SUCCESS"],
        "labels_needed": "2", "blind": "on"})
    queue = Queue.objects.get(name="shop successes")
    assert response["Location"] == queue.get_absolute_url()
    assert (queue.labels_needed, queue.blind, queue.filters["sites"]) == (2, True, [episode.site.slug])
    bad = reviewer_client.post(reverse("review:queue_create"), {"name": " ", "kind": "filter"}, follow=True)
    assert "give the queue a name" in bad.content.decode()
    bad = reviewer_client.post(reverse("review:queue_create"), {"name": "x", "judge_config": "987654"}, follow=True)
    assert "no judge config with id 987654" in bad.content.decode()
    assert Queue.objects.filter(builtin=False).count() == 1


@pytest.mark.parametrize("size", [1, 30])
def test_episode_page_query_count_is_fixed(viewer_client, django_assert_max_num_queries, size):
    episode = _rich_episode(n_shots=size, n_log=size * 10, n_labels=min(size, 6))
    queue = queue_create_from_filters(name="q", filters={}, user=None)
    with django_assert_max_num_queries(11):
        assert viewer_client.get(f"{episode.get_absolute_url()}?queue={queue.pk}").status_code == 200


@pytest.mark.parametrize("size", [1, 8])
def test_queue_and_label_query_counts_are_fixed(reviewer_client, django_assert_max_num_queries, size):
    run = RunFactory()
    episodes = [_rich_episode(n_shots=1, n_labels=size, run=run) for _ in range(size)]
    reviewer_client.get(reverse("review:queue_list"))
    queue = Queue.objects.get(kind=Queue.Kind.FALSE_POSITIVE, run=run)
    with django_assert_max_num_queries(13):  # fixed: at most one query per risk tier of the audit
        reviewer_client.get(queue.get_absolute_url())
    with django_assert_max_num_queries(9):  # a fixed number: every run's built-in queues come in one query
        reviewer_client.get(reverse("review:queue_list"))
    with django_assert_max_num_queries(8):
        reviewer_client.get(reverse("review:queue_progress", args=[queue.pk]))
    with django_assert_max_num_queries(18):
        reviewer_client.post(reverse("review:label_post", args=[episodes[0].pk]), {"verdict": "SUCCESS"},
                             HTTP_HX_REQUEST="true")


def test_odd_shaped_evidence_still_renders(viewer_client):
    episode = EpisodeFactory(request_log=["oops", 5, None, {"method": None, "path": None}],
                             data_changes=["x", {"before": "text", "after": None, "changed": {"qty": [1, 2]}}],
                             actions={"not": "a list"}, screen_text="plain text, not a list")
    JudgmentFactory(episode=episode, parts="not a list", verdict="NONE", error="answer is not JSON")
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "answer is not JSON" in html and "plain text, not a list" in html and "qty" in html


def test_validate_can_post_a_list_of_episodes_as_a_queue(reviewer_client):
    a, b = EpisodeFactory(), EpisodeFactory()
    response = reviewer_client.post(reverse("review:queue_from_episodes"),
                                    {"name": "false positives of run 3", "episode_ids": f"{b.pk},{a.pk}"})
    queue = Queue.objects.get(name="false positives of run 3")
    assert response["Location"] == queue.get_absolute_url()
    assert list(queue.members.values_list("episode_id", flat=True)) == [b.pk, a.pk]
    empty = reviewer_client.post(reverse("review:queue_from_episodes"), {"episode_ids": ""}, follow=True)
    assert "nothing to review" in empty.content.decode()


def test_a_stratified_sample_queue_from_the_form(reviewer_client):
    for verdict in ["SUCCESS", "SUCCESS", "NOT SUCCESS", "NONE"]:
        JudgmentFactory(verdict=verdict)
    response = reviewer_client.post(reverse("review:queue_create"), {"name": "sample", "kind": "sample",
                                                                     "per_verdict": "1", "blind": "on"})
    queue = Queue.objects.get(name="sample")
    assert response["Location"] == queue.get_absolute_url()
    assert sorted(queue.members.values_list("stratum", flat=True)) == ["NONE", "NOT SUCCESS", "SUCCESS"]


def test_an_all_unsure_episode_is_stated_the_same_on_the_episode_page_and_the_adjudication_list(adjudicator_client):
    episode = _rich_episode()
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="UNSURE")
    why = "Every reviewer is unsure (1): that is no decision, so an adjudicator decides."
    listed = adjudicator_client.get(reverse("review:adjudication")).content.decode()
    assert why in listed and "<th class=\"num\">Unsure</th>" in listed and UNSURE_RULE in listed
    page = adjudicator_client.get(episode.get_absolute_url()).content.decode()
    assert why in page and "agreeing labels" not in page and UNSURE_RULE in page
    agreed = _rich_episode()
    label_set(episode=agreed, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    assert agreed.task.task_id not in adjudicator_client.get(reverse("review:adjudication")).content.decode()
    assert "from the reviewer&#x27;s label" in adjudicator_client.get(agreed.get_absolute_url()).content.decode()


def test_a_label_post_sends_the_final_label_along_out_of_band(reviewer_client):
    episode = _rich_episode()
    url = reverse("review:label_post", args=[episode.pk])
    first = reviewer_client.post(url, {"verdict": "SUCCESS"}, HTTP_HX_REQUEST="true").content.decode()
    assert '<section id="final-label" hx-swap-oob="true">' in first and "from the reviewer&#x27;s label" in first
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    changed = reviewer_client.post(url, {"verdict": "NOT SUCCESS"}, HTTP_HX_REQUEST="true").content.decode()
    assert "The labels disagree (1 success, 1 not success)" in changed and "agreeing labels" not in changed


def test_counts_in_headings_read_as_english(viewer_client):
    episode = EpisodeFactory(request_log=LOG[:1])
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "Request log (1 request)" in html and "1 requests" not in html
