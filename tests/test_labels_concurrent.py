"""Labels under concurrent reviewers, through the real HTTP server: each reviewer has their own session and CSRF
token, and the posts of a round are released together by a barrier.

Seen before the fix (PostgreSQL): 48 of 100 posts answered 500 with two reviewers on one episode, and with 20
reviewers on 10 episodes the final label was wrong on 6 of 10 episodes. Every post must now store its label with one
history entry (or answer a clear error, never a 500), and every final label must equal the rule applied to the
labels in the database.
"""
from __future__ import annotations

import random
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
import requests
from django.db import connection

from taskgen.models import FinalLabel, FinalLabelChange, Label, LabelChange
from tests.factories import EpisodeFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "pw-for-tests"  # tests.factories.UserFactory's
VERDICTS = ["SUCCESS", "NOT SUCCESS", "UNSURE"]
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass
class Browser:
    """One person's browser: a cookie jar with their session and CSRF token."""

    base_url: str
    username: str
    session: requests.Session = field(default_factory=requests.Session)

    def log_in(self) -> None:
        page = self.session.get(f"{self.base_url}/accounts/login/", timeout=30)
        answer = self.session.post(f"{self.base_url}/accounts/login/", timeout=30, allow_redirects=False, data={
            "username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": CSRF.search(page.text)[1]})
        assert answer.status_code == 302, f"{self.username} could not log in: {answer.status_code}"

    def post(self, path: str, data: dict) -> int:
        token = self.session.cookies["csrftoken"]
        answer = self.session.post(f"{self.base_url}{path}", data={**data, "csrfmiddlewaretoken": token},
                                   headers={"Referer": f"{self.base_url}/"}, timeout=60, allow_redirects=False)
        return answer.status_code


def _browsers(live_server, role: str, count: int) -> list[Browser]:
    users = [UserFactory(username=f"{role}-{n:02d}", role=role) for n in range(count)]
    browsers = [Browser(base_url=live_server.url, username=u.username) for u in users]
    for browser in browsers:
        browser.log_in()
    return browsers


def _run_rounds(plan: list[list[tuple[Browser, str, dict]]]) -> list[int]:
    """Each round's posts start together (a barrier per round); the status codes of every post, in any order."""
    width = max(len(r) for r in plan)
    barrier, statuses, lock = threading.Barrier(width), [], threading.Lock()

    def worker(slot: int) -> None:
        try:
            for round_posts in plan:
                barrier.wait(timeout=120)
                if slot < len(round_posts):
                    browser, path, data = round_posts[slot]
                    status = browser.post(path, data)
                    with lock:
                        statuses.append(status)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(width)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def _assert_labels_and_history(posted: dict[tuple[str, int], list[str]]) -> None:
    """Each reviewer's label is their last posted verdict, with one history entry per change they made."""
    for (username, episode_id), verdicts in posted.items():
        label = Label.objects.get(reviewer__username=username, episode_id=episode_id)
        assert label.verdict == verdicts[-1]
        changes = sum(1 for before, after in zip([None] + verdicts, verdicts, strict=False) if before != after)
        assert LabelChange.objects.filter(label=label).count() == changes, (username, episode_id, verdicts)


def _assert_final_labels_follow_the_rule(episode_ids: list[int]) -> None:
    """Written out here, apart from the app's code: unanimous labels decide, anything else leaves no final label."""
    for episode_id in episode_ids:
        verdicts = set(Label.objects.filter(episode_id=episode_id).values_list("verdict", flat=True))
        final = FinalLabel.objects.filter(episode_id=episode_id).first()
        expected = verdicts.pop() if len(verdicts) == 1 else None
        assert (final.verdict if final else None) == expected, (episode_id, final)
        history = FinalLabelChange.objects.filter(episode_id=episode_id).order_by("changed_at", "id").last()
        assert (history.after["verdict"] if history and history.after else None) == expected


def _label_path(episode_id: int) -> str:
    return f"/episodes/{episode_id}/label/"


def test_two_reviewers_posting_at_the_same_moment_lose_nothing(live_server):
    episode = EpisodeFactory()
    alice, bob = _browsers(live_server, "reviewer", 2)
    rng, posted, plan = random.Random(10), defaultdict(list), []
    for _round in range(50):
        round_posts = []
        for browser in (alice, bob):
            verdict = rng.choice(VERDICTS)
            posted[(browser.username, episode.pk)].append(verdict)
            round_posts.append((browser, _label_path(episode.pk), {"verdict": verdict}))
        plan.append(round_posts)

    statuses = _run_rounds(plan)

    assert statuses.count(302) == 100, f"server answers: {sorted(set(statuses))}"
    _assert_labels_and_history(posted)
    _assert_final_labels_follow_the_rule([episode.pk])


def test_twenty_reviewers_on_ten_episodes_keep_every_label_and_every_final_label_right(live_server):
    episodes = [EpisodeFactory() for _ in range(10)]
    reviewers = _browsers(live_server, "reviewer", 20)
    rng, posted, plan = random.Random(20), defaultdict(list), []
    for round_number in range(15):
        round_posts = []
        for n, browser in enumerate(reviewers):
            # most rounds: two reviewers per episode; every third round: all twenty on the same episode
            index = round_number % 10 if round_number % 3 == 0 else (n // 2 + round_number) % 10
            # the first five episodes are labelled NOT SUCCESS by everyone: they must end with that final label
            verdict = "NOT SUCCESS" if index < 5 else rng.choice(VERDICTS)
            posted[(browser.username, episodes[index].pk)].append(verdict)
            round_posts.append((browser, _label_path(episodes[index].pk), {"verdict": verdict}))
        plan.append(round_posts)

    statuses = _run_rounds(plan)

    assert statuses.count(302) == 300, f"server answers: {sorted(set(statuses))}"
    _assert_labels_and_history(posted)
    _assert_final_labels_follow_the_rule([e.pk for e in episodes])
    assert FinalLabel.objects.filter(episode__in=episodes[:5], verdict="NOT SUCCESS").count() == 5


def test_editing_ones_label_while_an_adjudicator_decides_keeps_both(live_server):
    episode = EpisodeFactory()
    (reviewer,) = _browsers(live_server, "reviewer", 1)
    (adjudicator,) = _browsers(live_server, "adjudicator", 1)
    rng, posted, decided, plan = random.Random(30), defaultdict(list), [], []
    for n in range(20):
        verdict, decision = rng.choice(VERDICTS), rng.choice(VERDICTS[:2])
        posted[(reviewer.username, episode.pk)].append(verdict)
        decided.append(decision)
        plan.append([(reviewer, _label_path(episode.pk), {"verdict": verdict}),
                     (adjudicator, f"/episodes/{episode.pk}/adjudicate/",
                      {"verdict": decision, "reason": f"decision {n}"})])

    statuses = _run_rounds(plan)

    assert statuses.count(302) == 40, f"server answers: {sorted(set(statuses))}"
    _assert_labels_and_history(posted)
    final = FinalLabel.objects.get(episode=episode)
    assert final.adjudicated and final.verdict == decided[-1] and final.reason == "decision 19"
    adjudications = FinalLabelChange.objects.filter(episode=episode, after__adjudicated=True)
    assert adjudications.count() == 20  # each decision has its own reason, so each one is a change in the history
