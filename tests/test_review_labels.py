"""Labels: one per reviewer, every change logged, the final label follows agreement and waits for an adjudicator."""
from __future__ import annotations

import pytest

from review.services import label_set
from taskgen.labels.fields import ReviewError
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import FinalLabel, Label, LabelChange
from tests.factories import EpisodeFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Many users per test: hashing each password properly would take most of the test's time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_label_history_keeps_every_change_with_before_and_after():
    episode, alice = EpisodeFactory(), UserFactory(role="reviewer")
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS", note="looks fine")
    label_set(episode=episode, reviewer=alice, verdict="NOT SUCCESS", part_overrides=[1, 0, 1],
              tags=["side effect missed", " side effect missed "], note="the POST never happened")
    assert Label.objects.filter(episode=episode).count() == 1
    first, second = LabelChange.objects.order_by("id")
    assert first.before is None and first.after["verdict"] == "SUCCESS"
    assert second.before["verdict"] == "SUCCESS" and second.after == {
        "verdict": "NOT SUCCESS", "part_overrides": [0, 1], "note": "the POST never happened",
        "tags": ["side effect missed"]}
    assert second.changed_by == alice


def test_saving_the_same_label_again_adds_no_history():
    episode, alice = EpisodeFactory(), UserFactory(role="reviewer")
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    assert LabelChange.objects.count() == 1


def test_it_rejects_an_unknown_verdict_and_writes_nothing():
    episode, alice = EpisodeFactory(), UserFactory(role="reviewer")
    with pytest.raises(ReviewError, match="unknown verdict"):
        label_set(episode=episode, reviewer=alice, verdict="MAYBE")
    assert not Label.objects.exists() and not LabelChange.objects.exists()


def test_final_label_follows_a_single_label_and_agreeing_labels():
    episode = EpisodeFactory()
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    final = FinalLabel.objects.get(episode=episode)
    assert final.verdict == "SUCCESS" and not final.adjudicated
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    assert FinalLabel.objects.get(episode=episode).verdict == "SUCCESS"


def test_disagreeing_labels_unset_the_final_label_until_an_adjudicator_decides():
    episode, boss = EpisodeFactory(), UserFactory(role="adjudicator")
    alice, bob = UserFactory(role="reviewer"), UserFactory(role="reviewer")
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    label_set(episode=episode, reviewer=bob, verdict="NOT SUCCESS")
    assert not FinalLabel.objects.filter(episode=episode).exists()
    final_label_adjudicate(episode=episode, adjudicator=boss, verdict="NOT SUCCESS", reason="no POST in the log")
    final = FinalLabel.objects.get(episode=episode)
    assert (final.verdict, final.adjudicated, final.decided_by, final.reason) == (
        "NOT SUCCESS", True, boss, "no POST in the log")
    # a later label change does not overturn the adjudicator's decision
    label_set(episode=episode, reviewer=bob, verdict="SUCCESS")
    assert FinalLabel.objects.get(episode=episode).verdict == "NOT SUCCESS"


def test_adjudication_needs_a_reason():
    episode = EpisodeFactory()
    with pytest.raises(ReviewError, match="reason"):
        final_label_adjudicate(episode=episode, adjudicator=UserFactory(), verdict="SUCCESS", reason="  ")
    assert not FinalLabel.objects.exists()


def _superuser_client():
    from django.test import Client

    admin = UserFactory(username="root-admin")
    admin.is_superuser = admin.is_staff = True
    admin.save()
    client = Client()
    client.force_login(admin)
    return client


def test_labels_and_final_labels_are_read_only_in_the_django_admin():
    """An admin edit once changed a label with no history entry and no final-label rule: the admin only shows them."""
    episode, alice = EpisodeFactory(), UserFactory(role="reviewer")
    label = label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    client = _superuser_client()
    assert client.get("/admin/taskgen/label/").status_code == 200
    assert client.get(f"/admin/taskgen/label/{label.pk}/change/").status_code == 200  # shown, with its history
    edit = client.post(f"/admin/taskgen/label/{label.pk}/change/", {"episode": episode.pk, "reviewer": alice.pk,
                                                                   "verdict": "NOT SUCCESS", "part_overrides": "[]",
                                                                   "tags": "[]"})
    assert edit.status_code == 403
    final = FinalLabel.objects.get(episode=episode)
    for url in ["/admin/taskgen/label/add/", f"/admin/taskgen/label/{label.pk}/delete/",
                f"/admin/taskgen/finallabel/{final.pk}/delete/", "/admin/taskgen/finallabel/add/",
                "/admin/taskgen/labelchange/add/"]:
        assert client.post(url, {"post": "yes"}).status_code == 403, url
    label.refresh_from_db()
    assert label.verdict == "SUCCESS" and LabelChange.objects.count() == 1
    assert FinalLabel.objects.get(episode=episode).verdict == "SUCCESS"


def test_deleting_a_labelled_run_in_the_admin_is_refused_and_keeps_the_labels():
    episode, alice = EpisodeFactory(), UserFactory(role="reviewer")
    label_set(episode=episode, reviewer=alice, verdict="NOT SUCCESS")
    page = _superuser_client().post(f"/admin/taskgen/run/{episode.run_id}/delete/", {"post": "yes"})
    assert page.status_code == 200 and b"Cannot delete run" in page.content
    assert Label.objects.filter(episode=episode).exists() and FinalLabel.objects.filter(episode=episode).exists()


def test_the_final_label_keeps_its_history_of_rule_changes_and_adjudications():
    from taskgen.models import FinalLabelChange

    episode = EpisodeFactory()
    alice, bob, judge = UserFactory(role="reviewer"), UserFactory(role="reviewer"), UserFactory(role="adjudicator")
    label_set(episode=episode, reviewer=alice, verdict="SUCCESS")
    label_set(episode=episode, reviewer=bob, verdict="NOT SUCCESS")  # disagreement: no final label
    final_label_adjudicate(episode=episode, adjudicator=judge, verdict="NOT SUCCESS", reason="no order row")
    history = list(FinalLabelChange.objects.filter(episode=episode).order_by("id"))
    assert [(h.before and h.before["verdict"], h.after and h.after["verdict"]) for h in history] == [
        (None, "SUCCESS"), ("SUCCESS", None), (None, "NOT SUCCESS")]
    assert history[-1].after == {"verdict": "NOT SUCCESS", "adjudicated": True, "reason": "no order row",
                                 "decided_by": judge.username}
    assert [h.changed_by for h in history] == [alice, bob, judge]
