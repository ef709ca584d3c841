"""Hostile form input (issue 24): a NUL character in a label's note or tags, an adjudication's reason or a queue's
name answered 500 on PostgreSQL (psycopg refuses the query); now every form field of the app answers 400 naming
the field, by the task edit form's rule (taskgen/text_input.py). Free text has caps, said on the forms and enforced
on the server: a 2 MB label note was stored."""
from __future__ import annotations

import pytest
from django.urls import reverse

from review.models import Queue
from review.services import label_set
from taskgen.labels.fields import NOTE_MAX, QUEUE_NAME_MAX, REASON_MAX
from taskgen.models import FinalLabel, Label, Task
from tests.factories import EpisodeFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db
NUL = "bad\x00value"


def _label_url(episode) -> str:
    return reverse("review:label_post", args=[episode.pk])


@pytest.mark.parametrize("field", ["note", "tags"])
def test_a_nul_in_a_label_field_is_a_400_naming_the_field(reviewer_client, field):
    episode = EpisodeFactory()
    response = reviewer_client.post(_label_url(episode), {"verdict": "SUCCESS", field: NUL})
    assert response.status_code == 400
    assert f"The field &#x27;{field}&#x27; contains a NUL character" in response.content.decode()
    assert not Label.objects.exists()


def test_a_nul_in_an_adjudication_reason_is_a_400(adjudicator_client):
    episode = EpisodeFactory()
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    response = adjudicator_client.post(reverse("review:adjudicate_post", args=[episode.pk]),
                                       {"verdict": "NOT SUCCESS", "reason": NUL})
    assert response.status_code == 400 and "&#x27;reason&#x27; contains a NUL" in response.content.decode()
    assert not FinalLabel.objects.get(episode=episode).adjudicated


def test_a_nul_in_a_queue_name_is_a_400(reviewer_client):
    response = reviewer_client.post(reverse("review:queue_create"), {"name": NUL, "kind": "filter"})
    assert response.status_code == 400 and "&#x27;name&#x27; contains a NUL" in response.content.decode()
    assert not Queue.objects.filter(builtin=False).exists()


def test_a_nul_in_a_query_string_or_a_field_name_is_a_400(viewer_client):
    episode = EpisodeFactory()
    assert viewer_client.get(reverse("review:run_detail", args=[episode.run_id]), {"search": NUL}).status_code == 400
    assert viewer_client.get(reverse("review:run_list"), {"x\x00y": "1"}).status_code == 400


def test_the_task_edit_form_refuses_a_nul_as_before(admin_client_role):
    task = TaskFactory(instruction="Find the cheapest mug")
    response = admin_client_role.post(reverse("review:task_edit", args=[task.pk]),
                                      {"instruction": NUL, "task_kind": "info"})
    assert response.status_code == 400 and "instruction" in response.content.decode()
    assert Task.objects.get(pk=task.pk).instruction == "Find the cheapest mug"


def test_a_2_mb_label_note_is_refused_and_the_cap_is_said_on_the_form(reviewer_client):
    episode = EpisodeFactory()
    response = reviewer_client.post(_label_url(episode), {"verdict": "SUCCESS", "note": "x" * 2_000_000})
    assert response.status_code == 400
    assert f"note is 2,000,000 characters long: at most {NOTE_MAX:,}" in response.content.decode()
    assert not Label.objects.exists()
    page = reviewer_client.get(reverse("review:episode_detail", args=[episode.pk])).content.decode()
    assert f'maxlength="{NOTE_MAX}"' in page and f"up to {NOTE_MAX} characters" in page
    ok = reviewer_client.post(_label_url(episode), {"verdict": "SUCCESS", "note": "x" * NOTE_MAX})
    assert ok.status_code == 302 and len(Label.objects.get().note) == NOTE_MAX


def test_a_refused_label_in_the_htmx_panel_names_the_field(reviewer_client):
    episode = EpisodeFactory()
    response = reviewer_client.post(_label_url(episode), {"verdict": "SUCCESS", "note": "x" * (NOTE_MAX + 1)},
                                    HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "note is 5,001 characters long" in response.content.decode()
    assert not Label.objects.exists()


def test_too_many_tags_or_a_long_reason_or_name_are_refused(reviewer_client, adjudicator_client):
    episode = EpisodeFactory()
    tags = ",".join(f"tag{n}" for n in range(30))
    response = reviewer_client.post(_label_url(episode), {"verdict": "SUCCESS", "tags": tags})
    assert response.status_code == 400 and "30 tags: at most 20" in response.content.decode()
    label_set(episode=episode, reviewer=UserFactory(role="reviewer"), verdict="SUCCESS")
    response = adjudicator_client.post(reverse("review:adjudicate_post", args=[episode.pk]),
                                       {"verdict": "NOT SUCCESS", "reason": "y" * (REASON_MAX + 1)})
    assert response.status_code == 400 and not FinalLabel.objects.get(episode=episode).adjudicated
    response = reviewer_client.post(reverse("review:queue_create"), {"name": "q" * (QUEUE_NAME_MAX + 1)})
    assert response.status_code == 400 and not Queue.objects.filter(builtin=False).exists()


def test_a_10_mb_answer_is_shown_cut_with_a_link_to_the_whole_text(viewer_client):
    """Seen: a 10 MB agent answer made a 10.5 MB episode page."""
    answer = "# Findings\n\n" + "The mug costs 12 dollars. " * 400_000
    assert len(answer) > 10_000_000
    episode = EpisodeFactory(answer=answer, screen_text=["s" * 3_000_000], task__instruction="Find " + "i" * 1_000_000,
                             actions=[{"type": {"text": "t" * 1_000_000}}],
                             request_log=[{"method": "POST", "path": "/cart", "body": {"q": "b" * 1_000_000}}],
                             data_changes=[{"table": "cart", "op": "update", "before": {"note": "a"},
                                            "after": {"note": "n" * 1_000_000}}])
    page = viewer_client.get(reverse("review:episode_detail", args=[episode.pk]))
    text = page.content.decode()
    assert page.status_code == 200 and len(page.content) < 200_000
    assert f"The answer is {len(answer):,} characters long: the first 20000 are shown" in text
    assert "more characters]" in text  # the request body, the changed value and the action say they were cut
    whole = reverse("review:episode_text", args=[episode.pk, "answer"])
    assert whole in text and reverse("review:episode_text", args=[episode.pk, "screen-text"]) in text
    response = viewer_client.get(whole)
    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == answer
    log = viewer_client.get(reverse("review:episode_text", args=[episode.pk, "request-log"])).content.decode()
    assert "b" * 1_000_000 in log
    assert viewer_client.get(reverse("review:episode_text", args=[episode.pk, "nothing"])).status_code == 404


def test_the_whole_text_needs_a_login(client):
    episode = EpisodeFactory()
    assert client.get(reverse("review:episode_text", args=[episode.pk, "answer"])).status_code == 302
