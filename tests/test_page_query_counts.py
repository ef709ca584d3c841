"""The review pages cost the same number of queries whatever they show: one row or many on the queue and run pages,
one screenshot, log line, judgment and label or many on the episode page and after a label post."""
from __future__ import annotations

import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from PIL import Image

from review.models import Queue
from review.services import label_set, queues_builtin_ensure
from taskgen.blobs import blob_store_image
from taskgen.models import Screenshot, VerifierResult
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db
SMALL, LARGE = 1, 7
LOG_LINE = {"method": "POST", "path": "/sites/shop/cart/add", "query": {}, "body": {"item": "lamp"}, "status": 302}
CHANGE = {"collection": "cart_items", "op": "create", "before": None, "after": {"id": 4, "name": "lamp"}}


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _png(n: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 20), (n * 30 % 256, 90, 160)).save(buffer, "PNG")
    return buffer.getvalue()


def _episode(run, size: int, reviewers: list):
    """An episode with `size` of everything its page lists: screenshots, log lines, changes, judgments, labels."""
    episode = EpisodeFactory(run=run, task__task_kind="action", request_log=[LOG_LINE] * size,
                             data_changes=[CHANGE] * size, actions=[{"click": {"index": n}} for n in range(size)],
                             steps=size)
    for n in range(size):
        Screenshot.objects.create(episode=episode, step=n, name=f"step_{n}.png", blob=blob_store_image(data=_png(n)))
        config = JudgeConfigFactory(provider="gemini", model=f"gemini-{n}") if n else JudgeConfigFactory()
        JudgmentFactory(episode=episode, config=config, verdict="SUCCESS", parts=[
            {"part": "add the lamp", "done": True, "evidence": "in request #0; change #0; step 1"}])
    VerifierResult.objects.create(episode=episode, ok=False, source="sandbox")
    for reviewer in reviewers[:size]:
        label_set(episode=episode, reviewer=reviewer, verdict="SUCCESS", note="ok")
    return episode


def _world(size: int) -> dict:
    """A run of `size` + 1 episodes, each holding `size` of everything; the first labelled by `size` reviewers, the
    others open in the queue."""
    run = RunFactory()
    reviewers = [UserFactory(role="reviewer") for _ in range(size)]
    episodes = [_episode(run, size, reviewers if n == 0 else []) for n in range(size + 1)]
    queues_builtin_ensure()
    return {"run": run, "episodes": episodes, "queue": Queue.objects.get(kind=Queue.Kind.FALSE_POSITIVE, run=run)}


def _queries(call, shows: list[str]) -> int:
    call()  # once first: sessions, caches and the like settle
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code == 200
    html = response.content.decode()
    assert all(text in html for text in shows), "the page does not show every row it should"
    return len(captured)


def _label_post_queries(client, episode, queue) -> int:
    """A first label, on an episode others labelled SUCCESS: the final label goes from agreed to disagreeing."""
    url = reverse("review:label_post", args=[episode.pk])
    with CaptureQueriesContext(connection) as captured:
        assert client.post(url, {"verdict": "NOT SUCCESS", "queue": queue.pk}, HTTP_HX_REQUEST="true").status_code \
            == 200
    return len(captured)


def _open_task_ids(world: dict) -> list[str]:
    return [e.task.task_id for e in world["episodes"][1:]]


PAGES = {  # the page, and what it must show
    "queue page": (lambda client, w: client.get(w["queue"].get_absolute_url()), _open_task_ids),
    "queue progress": (lambda client, w: client.get(reverse("review:queue_progress", args=[w["queue"].pk]),
                                                    {"detail": "1"}), lambda w: [" done ("]),
    "episode page": (lambda client, w: client.get(w["episodes"][0].get_absolute_url(), {"queue": w["queue"].pk}),
                     lambda w: [f"step_{n}.png" for n in range(len(w["episodes"]) - 1)]),
    "run page": (lambda client, w: client.get(w["run"].get_absolute_url()),
                 lambda w: [e.task.task_id for e in w["episodes"]]),
    "run page filtered and sorted": (lambda client, w: client.get(w["run"].get_absolute_url(), {
        "verdicts": "SUCCESS", "verifier": "fail", "label_state": "unlabelled", "sort": "-verdict",
        "search": "item"}), _open_task_ids),
}


@pytest.mark.parametrize("page", list(PAGES))
def test_a_page_makes_the_same_number_of_queries_for_one_row_or_many(reviewer_client, page):
    call, shows = PAGES[page]
    counts = []
    for size in (SMALL, LARGE):
        world = _world(size)
        counts.append(_queries(lambda w=world: call(reviewer_client, w), shows(world)))
    assert counts[0] == counts[1], f"{page}: {counts[0]} queries for one row, {counts[1]} for {LARGE}"


def test_a_label_post_makes_the_same_number_of_queries_whatever_the_episode_holds(reviewer_client):
    counts = []
    for size in (SMALL, LARGE):
        world = _world(size)
        counts.append(_label_post_queries(reviewer_client, world["episodes"][0], world["queue"]))
    assert counts[0] == counts[1], f"label post: {counts[0]} queries beside one label, {counts[1]} beside {LARGE}"


def test_taking_the_next_item_makes_the_same_number_of_queries_whatever_the_queue_holds(reviewer_client):
    """Take next reads one lean row for the next item, however many episodes wait and however much each holds."""
    counts = []
    for size in (SMALL, LARGE):
        world = _world(size)
        url = reverse("review:queue_next", args=[world["queue"].pk])
        with CaptureQueriesContext(connection) as captured:
            response = reviewer_client.post(url)
        assert response.status_code == 302 and "/episodes/" in response["Location"]
        selected = [q["sql"].split(" FROM ")[0] for q in captured]
        assert not any("request_log" in columns for columns in selected), "take next read the episodes' evidence"
        counts.append(len(captured))
        reviewer_client.post(reverse("review:queue_release", args=[world["queue"].pk]))
    assert counts[0] == counts[1], f"take next: {counts[0]} queries beside one open episode, {counts[1]} beside {LARGE}"
