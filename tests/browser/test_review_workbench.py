"""A reviewer works through the false-positive queue with the keyboard alone; hostile episode text runs nothing."""
from __future__ import annotations

import io

import pytest
from PIL import Image

from review.models import Queue
from review.services import queues_builtin_ensure
from taskgen.blobs import blob_store_image
from taskgen.models import Label, Screenshot
from tests.factories import EpisodeFactory, JudgmentFactory, RunFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL = '<script>window.__pwned = 1; alert("x")</script><img src="nope.png" onerror="window.__pwned = 2; alert(2)">'


def _png(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(buf, "PNG")
    return buf.getvalue()


def _log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_reviewer_labels_three_episodes_of_the_false_positive_queue_with_the_keyboard(page, live_server):
    run = RunFactory(name="audited")
    episodes = [JudgmentFactory(verdict="SUCCESS", episode=EpisodeFactory(run=run)).episode for _ in range(3)]
    for n, episode in enumerate(episodes):
        for step, color in enumerate(["red", "green"]):
            Screenshot.objects.create(episode=episode, step=step, name=f"step_{step}.png",
                                      blob=blob_store_image(data=_png(color if n == 0 else "blue")))
    JudgmentFactory(verdict="NOT SUCCESS", episode=EpisodeFactory(run=run))  # not a false-positive candidate
    UserFactory(username="rita", role="reviewer")
    queues_builtin_ensure()
    queue = Queue.objects.get(kind=Queue.Kind.FALSE_POSITIVE, run=run)

    _log_in(page, live_server, "rita")
    page.goto(f"{live_server.url}{queue.get_absolute_url()}")
    with page.expect_navigation():
        page.keyboard.press("N")
    seen = []
    for key, text in [("1", "Success"), ("2", "Not success"), ("3", "Unsure")]:
        page.wait_for_url(f"**/episodes/*/?queue={queue.pk}")
        # SQLite's shared in-memory test database refuses a write while another thread reads (the screenshots)
        page.wait_for_load_state("networkidle")
        seen.append(int(page.url.split("/episodes/")[1].split("/")[0]))
        if len(seen) == 1:  # the step viewer follows the arrow keys
            page.keyboard.press("ArrowRight")
            assert page.locator("#step-name").inner_text().startswith("step_1.png")
            page.keyboard.press("ArrowLeft")
            assert page.locator("#step-name").inner_text().startswith("step_0.png")
            page.wait_for_load_state("networkidle")
        page.keyboard.press(key)
        page.locator(".my-verdict", has_text=text).wait_for()
        with page.expect_navigation():
            page.keyboard.press("N")
    page.wait_for_url(f"**/queues/{queue.pk}/")
    assert "Nothing left for you" in page.content()

    labels = {lb.episode_id: lb.verdict for lb in Label.objects.filter(reviewer__username="rita")}
    assert labels == dict(zip(seen, ["SUCCESS", "NOT SUCCESS", "UNSURE"], strict=True))
    assert sorted(seen) == sorted(e.pk for e in episodes)


def test_question_mark_shows_the_shortcuts(page, live_server):
    episode = EpisodeFactory()
    UserFactory(username="vic", role="viewer")
    _log_in(page, live_server, "vic")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    assert not page.locator("#shortcuts").is_visible()
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()


def test_hostile_markup_in_an_episode_is_shown_as_text_and_runs_nothing(page, live_server):
    episode = EpisodeFactory(answer=EVIL, screen_text=["first page", EVIL], actions=[{"type": {"text": EVIL}}],
                             request_log=[{"method": "POST", "path": "/x", "body": {"q": EVIL}, "status": 200}])
    JudgmentFactory(episode=episode, parts=[{"part": EVIL, "done": True, "evidence": EVIL}])
    UserFactory(username="rex", role="reviewer")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    _log_in(page, live_server, "rex")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)  # give any injected handler (an image error) the chance to fire
    assert dialogs == []
    assert page.evaluate("window.__pwned") is None
    assert page.title() == f"{episode.task.task_id} · Taskgen Review"
    assert page.locator(".markdown.answer").inner_text() == EVIL  # rendered as Markdown: the markup is text
    assert page.locator("pre.screen-text").inner_text() == EVIL


def test_blind_queue_reveals_the_judge_after_the_keyboard_label(page, live_server):
    from review.services import queue_create_from_filters

    episode = JudgmentFactory(verdict="SUCCESS", parts=[{"part": "find it", "done": True, "evidence": "seen"}]).episode
    UserFactory(username="bea", role="reviewer")
    queue = queue_create_from_filters(name="blind audit", filters={}, user=None, blind=True)
    _log_in(page, live_server, "bea")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}?queue={queue.pk}")
    page.wait_for_load_state("networkidle")
    assert "Blind review" in page.locator("#judgments").inner_text()
    page.keyboard.press("2")
    page.locator("#judgments .judgment", has_text="find it").wait_for()
    assert "SUCCESS" in page.locator("#judgments").inner_text()
    assert Label.objects.get(reviewer__username="bea").verdict == "NOT SUCCESS"


def test_queue_list_fills_in_each_queue_s_progress(page, live_server):
    JudgmentFactory(verdict="SUCCESS")
    UserFactory(username="vera", role="viewer")
    _log_in(page, live_server, "vera")
    page.goto(f"{live_server.url}/queues/")
    row = page.locator("tr", has_text="False-positive audit")
    row.locator(".queue-progress").wait_for()
    assert "0 of 1 done (0%), 1 left" in row.inner_text()


def test_queue_page_fills_in_its_progress_after_it_shows(page, live_server):
    JudgmentFactory(verdict="SUCCESS")
    UserFactory(username="vera", role="viewer")
    _log_in(page, live_server, "vera")
    page.goto(f"{live_server.url}/queues/")
    page.get_by_role("link", name="False-positive audit").first.click()
    page.locator("#queue-progress progress").wait_for()
    assert "0 of 1 done (0%), 1 left" in page.locator("#queue-progress").inner_text()
    assert "Nobody has labelled in this queue yet." in page.locator("#queue-progress").inner_text()
