"""Issue 22, reviewer quality: known-truth checks (episodes a verifier decided) mixed into any queue at a set rate,
unmarked; each reviewer's accuracy on them with an exact binomial interval, on a reviewers page; labels of reviewers
below a chosen accuracy flagged in adjudication, and left out by `final_verdicts_trusted` for a certificate."""
from __future__ import annotations

import random

import pytest
from django.urls import reverse
from scipy.stats import beta

from review.models import Queue
from review.reviewer_quality import check_due
from review.services import label_set, queue_create_from_filters, queue_take_next, queues_builtin_ensure
from taskgen.labels.quality import QualityError, final_verdicts_trusted, reviewer_accuracy, reviewers_below, share_check
from taskgen.models import Judgment, Label, ReviewerCheck, VerifierResult
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def run_with_truth():
    """A run of 12 judged episodes, 4 of them decided by a verifier (2 passed, 2 failed)."""
    run, config = RunFactory(name="sandbox-demo"), JudgeConfigFactory()
    episodes = [EpisodeFactory(run=run) for _ in range(12)]
    for n, episode in enumerate(episodes):
        JudgmentFactory(episode=episode, config=config, verdict="SUCCESS")
        if n % 3 == 0:
            VerifierResult.objects.create(episode=episode, ok=n % 2 == 0, source="sandbox",
                                          detail={"parts": [{"part": "the answer states the price", "ok": n % 2 == 0}]})
    return run, episodes


def _queue(run, rate: float, user=None) -> Queue:
    queue = queue_create_from_filters(name="every episode", filters={"runs": [run.pk]}, user=user)
    queue.check_rate = rate
    queue.save()
    return queue


def _checks(reviewer, truth: list[bool], verdicts: list[str]) -> None:
    """`reviewer` was served checks of these truths and labelled them so (through the label service)."""
    for ok, verdict in zip(truth, verdicts, strict=True):
        episode = EpisodeFactory()
        ReviewerCheck.objects.create(episode=episode, reviewer=reviewer, truth=ok)
        label_set(episode=episode, reviewer=reviewer, verdict=verdict)


def test_a_queue_with_checks_serves_known_truth_episodes_and_records_them(run_with_truth):
    run, episodes = run_with_truth
    ann = UserFactory(username="ann", role="reviewer")
    queue = _queue(run, 1.0)
    served = queue_take_next(queue=queue, reviewer=ann)
    check = ReviewerCheck.objects.get(reviewer=ann)
    assert served.pk == check.episode_id and check.queue_id == queue.pk
    assert check.truth == VerifierResult.objects.get(episode_id=served.pk).ok
    assert reviewer_accuracy()[0].unanswered == 1
    assert queue_take_next(queue=queue, reviewer=ann).pk == served.pk  # held: a reload serves the same check
    first = "SUCCESS" if check.truth else "NOT SUCCESS"
    label_set(episode=served, reviewer=ann, verdict=first)
    label_set(episode=served, reviewer=ann, verdict="UNSURE")  # changed with the verifier in view
    [row] = reviewer_accuracy()
    assert (row.served, row.unanswered, row.unsure, row.decided, row.correct) == (1, 0, 0, 1, 1)  # the first label


def test_a_queue_without_checks_serves_none_and_a_check_is_never_served_twice(run_with_truth):
    run, _ = run_with_truth
    ann = UserFactory(username="ann", role="reviewer")
    plain = _queue(run, 0.0)
    for _ in range(5):
        label_set(episode=queue_take_next(queue=plain, reviewer=ann), reviewer=ann, verdict="SUCCESS")
    assert ReviewerCheck.objects.count() == 0
    checked = _queue(run, 1.0)
    served = []
    while (episode := queue_take_next(queue=checked, reviewer=ann)) is not None:
        served.append(episode.pk)
        label_set(episode=episode, reviewer=ann, verdict="SUCCESS")
    known = set(VerifierResult.objects.values_list("episode_id", flat=True))
    labelled_before = set(Label.objects.filter(reviewer=ann).exclude(episode_id__in=served)
                          .values_list("episode_id", flat=True))
    assert len(served) == len(set(served)) == 7  # every episode left, each once
    assert set(ReviewerCheck.objects.values_list("episode_id", flat=True)) == known - labelled_before


def test_checks_come_at_the_set_rate():
    draw = random.Random(22)
    queue = Queue(check_rate=0.3)
    share = sum(check_due(queue, draw) for _ in range(10_000)) / 10_000
    assert abs(share - 0.3) < 0.02  # binomial sd 0.0046: four of them
    assert not any(check_due(Queue(check_rate=0.0), draw) for _ in range(1000))


def test_a_check_is_unmarked_and_the_verifier_shows_only_after_labelling(client, run_with_truth):
    run, episodes = run_with_truth
    ann = UserFactory(username="ann", role="reviewer")
    client.force_login(ann)
    queue = _queue(run, 1.0)
    check = queue_take_next(queue=queue, reviewer=ann)
    ordinary = next(e for e in episodes if not hasattr(e, "verifier_result") and e.pk != check.pk)
    pages = [client.get(f"{e.get_absolute_url()}?queue={queue.pk}").content.decode() for e in (check, ordinary)]
    for page in pages:
        assert "The verifier's result appears after you label." in page
        assert "check" not in page.split('id="judgments"')[1].split("</section>")[0].lower()
    assert "the answer states the price" not in pages[0]
    answer = client.post(reverse("review:label_post", args=[check.pk]), {"verdict": "SUCCESS", "queue": queue.pk},
                         HTTP_HX_REQUEST="true").content.decode()
    assert "the answer states the price" in answer  # revealed with the label


def test_the_queue_page_of_a_queue_with_checks_leaves_the_verifier_out(reviewer_client, run_with_truth):
    run, _ = run_with_truth
    queue = _queue(run, 0.2)
    html = reviewer_client.get(queue.get_absolute_url()).content.decode()
    assert "the verifier says otherwise" not in html and "known-truth checks mixed in" in html
    queue.check_rate = 0
    queue.save()
    assert "the verifier says otherwise" in reviewer_client.get(queue.get_absolute_url()).content.decode()


def test_accuracy_and_its_interval_match_an_independent_clopper_pearson():
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    _checks(ann, [True] * 6 + [False] * 4, ["SUCCESS"] * 6 + ["NOT SUCCESS"] * 3 + ["SUCCESS"])
    _checks(bob, [True, False, True], ["NOT SUCCESS", "UNSURE", "SUCCESS"])
    ReviewerCheck.objects.create(episode=EpisodeFactory(), reviewer=bob, truth=True)  # served, not labelled
    Label.objects.create(episode=ReviewerCheck.objects.last().episode, reviewer=ann, verdict="SUCCESS")  # not bob's
    rows = {row.username: row for row in reviewer_accuracy()}
    a, b = rows["ann"], rows["bob"]
    assert (a.decided, a.correct, a.accuracy) == (10, 9, 0.9)
    # Clopper-Pearson by its definition: beta quantiles at 2.5% and 97.5%
    assert (a.low, a.high) == (round(beta.ppf(0.025, 9, 2), 3), round(beta.ppf(0.975, 10, 1), 3))
    assert (b.served, b.unanswered, b.unsure, b.decided, b.correct, b.accuracy) == (4, 1, 1, 2, 1, 0.5)
    assert b.low == round(beta.ppf(0.025, 1, 2), 3) and b.high == round(beta.ppf(0.975, 2, 1), 3)


def test_reviewers_below_an_accuracy_by_estimate_or_by_interval():
    ann, bob, cy = UserFactory(username="ann"), UserFactory(username="bob"), UserFactory(username="cy")
    _checks(ann, [True] * 20, ["SUCCESS"] * 19 + ["NOT SUCCESS"])  # 0.95
    _checks(bob, [True] * 20, ["SUCCESS"] * 10 + ["NOT SUCCESS"] * 10)  # 0.5: below even at the interval's top
    _checks(cy, [True] * 5, ["SUCCESS"] * 4 + ["NOT SUCCESS"])  # 0.8 on five: below 0.9, but not surely
    UserFactory(username="dee")  # never checked: nothing known, never flagged
    assert reviewers_below(accuracy=0.9) == {bob.pk, cy.pk}
    assert reviewers_below(accuracy=0.9, basis="upper") == {bob.pk}
    assert reviewers_below(accuracy=0.4) == set()
    with pytest.raises(QualityError):
        reviewers_below(accuracy=0.9, basis="median")


def test_final_verdicts_trusted_leave_out_the_labels_of_reviewers_below(run_with_truth):
    _, episodes = run_with_truth
    good, bad = UserFactory(username="good"), UserFactory(username="bad")
    _checks(good, [True] * 10, ["SUCCESS"] * 10)
    _checks(bad, [True] * 10, ["NOT SUCCESS"] * 6 + ["SUCCESS"] * 4)
    split, only_bad, agreed = episodes[1], episodes[2], episodes[4]
    label_set(episode=split, reviewer=good, verdict="SUCCESS")
    label_set(episode=split, reviewer=bad, verdict="NOT SUCCESS")
    label_set(episode=only_bad, reviewer=bad, verdict="SUCCESS")
    label_set(episode=agreed, reviewer=good, verdict="NOT SUCCESS")
    trusted = final_verdicts_trusted(episode_ids=[split.pk, only_bad.pk, agreed.pk], accuracy=0.8)
    assert trusted == {split.pk: "SUCCESS", only_bad.pk: None, agreed.pk: "NOT SUCCESS"}


@pytest.mark.parametrize(("raw", "share"), [("0.1", 0.1), ("10%", 0.1), (" 0 ", 0.0), ("1", 1.0)])
def test_a_check_rate_is_a_share(raw, share):
    assert share_check(raw, what="the check rate", zero_ok=True) == pytest.approx(share)


@pytest.mark.parametrize("raw", ["-0.1", "1.5", "150%", "ten", ""])
def test_a_bad_check_rate_is_refused(raw):
    with pytest.raises(QualityError, match="the check rate"):
        share_check(raw, what="the check rate", zero_ok=True)


def test_adjudicators_set_a_queues_check_rate(client, run_with_truth):
    run, _ = run_with_truth
    queue = _queue(run, 0.0)
    url = reverse("review:queue_check_rate", args=[queue.pk])
    client.force_login(UserFactory(username="rev", role="reviewer"))
    assert client.post(url, {"check_rate": "0.5"}).status_code == 403
    client.force_login(UserFactory(username="adj", role="adjudicator"))
    page = client.post(url, {"check_rate": "10%"}, follow=True).content.decode()
    queue.refresh_from_db()
    assert queue.check_rate == pytest.approx(0.1) and "Known-truth checks: 10%" in page
    page = client.post(url, {"check_rate": "2"}, follow=True).content.decode()
    queue.refresh_from_db()
    assert queue.check_rate == pytest.approx(0.1) and "between 0 and 1" in page
    assert client.get(url).status_code == 405


def test_the_reviewers_page_shows_accuracy_with_its_interval_to_adjudicators(client):
    bob = UserFactory(username="bob")
    _checks(bob, [True] * 10, ["SUCCESS"] * 5 + ["NOT SUCCESS"] * 5)
    url = reverse("review:reviewers")
    assert client.get(url).status_code == 302  # login first
    client.force_login(UserFactory(username="rev", role="reviewer"))
    assert client.get(url).status_code == 403
    client.force_login(UserFactory(username="adj", role="adjudicator"))
    html = client.get(url, {"accuracy": "0.9"}).content.decode()
    low, high = round(beta.ppf(0.025, 5, 6), 3), round(beta.ppf(0.975, 6, 5), 3)
    assert f"{low} – {high}" in html and "below 0.9: labels flagged" in html
    assert "below 0.3" not in client.get(url, {"accuracy": "0.3"}).content.decode()
    assert "the accuracy must be" in client.get(url, {"accuracy": "lots"}).content.decode()


def test_adjudication_flags_the_labels_of_reviewers_below_the_accuracy(client, run_with_truth):
    _, episodes = run_with_truth
    good, bad = UserFactory(username="good"), UserFactory(username="bad")
    _checks(bad, [True] * 10, ["NOT SUCCESS"] * 5 + ["SUCCESS"] * 5)
    label_set(episode=episodes[1], reviewer=good, verdict="SUCCESS")
    label_set(episode=episodes[1], reviewer=bad, verdict="NOT SUCCESS")
    adjudicator = UserFactory(username="adj", role="adjudicator")
    client.force_login(adjudicator)
    html = client.get(reverse("review:adjudication"), {"accuracy": "0.8"}).content.decode()
    assert "bad: Not success (accuracy 0.5 on 10)" in html and "good: Success" not in html
    assert "bad: Not success" not in client.get(reverse("review:adjudication"), {"accuracy": "0.4"}).content.decode()
    page = client.get(episodes[1].get_absolute_url()).content.decode()
    assert page.count("reviewer below 0.8 accuracy") == 1  # bad's label, on the page where the adjudicator decides


def test_a_check_comes_from_what_the_queue_covers_when_it_can(run_with_truth):
    """In the false-positive audit (judged successes only) a check is a judged success too, so its verdict does not
    give it away; a queue whose episodes have no verifier takes checks from its run, then from any run."""
    run, episodes = run_with_truth
    known_failures = [e for e in episodes if getattr(e, "verifier_result", None) is not None]
    Judgment.objects.filter(episode__in=known_failures[1:]).update(verdict="NOT SUCCESS")
    queues_builtin_ensure()
    audit = Queue.objects.get(builtin=True, kind=Queue.Kind.FALSE_POSITIVE, run=run)
    audit.check_rate = 1.0
    audit.save()
    ann = UserFactory(username="ann", role="reviewer")
    assert queue_take_next(queue=audit, reviewer=ann).pk == known_failures[0].pk
    other_run = RunFactory(name="no-verifier")
    EpisodeFactory(run=other_run)
    elsewhere = _queue(other_run, 1.0)
    served = queue_take_next(queue=elsewhere, reviewer=ann)
    assert served.run_id == run.pk and served.pk != known_failures[0].pk  # no verifier in its run: any run's
