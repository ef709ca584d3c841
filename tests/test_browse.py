"""The browse pages: runs, a run's episodes (paginated), the episode page (escaped), screenshots (logged in only)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from taskgen.models import Blob, Episode, Screenshot
from taskgen.stages.import_.service import import_run_dir
from tests.factories import EpisodeFactory, RunFactory, TaskFactory
from tests.rundirs import build_run

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('x')</script>"


@pytest.fixture
def imported(tmp_path) -> Episode:
    """One imported episode with 11 step screenshots, a final screen and a row image."""
    run_dir = build_run(tmp_path, ["shop-a"], steps=11)
    import_run_dir(run_dir=run_dir)
    return Episode.objects.get()


def _urls(episode: Episode) -> list[str]:
    blob = episode.screenshots.first().blob
    return ["/", episode.run.get_absolute_url(), episode.get_absolute_url(), blob.get_absolute_url(),
            blob.get_thumbnail_url()]


def test_anonymous_visitors_are_sent_to_login_from_every_page_and_screenshot(client, imported):
    urls = _urls(imported) + [s.blob.get_absolute_url() for s in imported.screenshots.all()]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_a_user_without_a_role_gets_no_page_and_no_screenshot(norole_client, imported):
    for url in _urls(imported):
        assert norole_client.get(url).status_code == 403, url


def test_the_pages_refuse_posts(viewer_client, imported):
    for url in _urls(imported):
        assert viewer_client.post(url).status_code == 405, url


def test_a_viewer_gets_the_screenshot_bytes_and_a_thumbnail_made_on_first_request(viewer_client, imported):
    final = imported.screenshots.get(kind="final")
    response = viewer_client.get(final.blob.get_absolute_url())
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert not Blob.objects.get(pk=final.blob_id).has_thumbnail
    thumb = viewer_client.get(final.blob.get_thumbnail_url())
    assert thumb.status_code == 200 and thumb["Content-Type"] == "image/webp"
    assert b"".join(thumb.streaming_content)[8:12] == b"WEBP"
    assert Blob.objects.get(pk=final.blob_id).has_thumbnail


def test_the_screenshot_bytes_are_the_imported_files(viewer_client, imported):
    final = imported.screenshots.get(kind="final")
    body = b"".join(viewer_client.get(final.blob.get_absolute_url()).streaming_content)
    assert body == (Path(imported.source_path) / "final.png").read_bytes()


def test_an_unknown_blob_is_not_found(viewer_client):
    assert viewer_client.get("/blobs/" + "0" * 64 + "/").status_code == 404
    assert viewer_client.get("/blobs/" + "0" * 64 + "/thumb/").status_code == 404


def test_the_episode_page_shows_screens_in_step_order_with_the_final_screen_last(viewer_client, imported):
    html = viewer_client.get(imported.get_absolute_url()).content.decode()
    names = [f"step_{n}.png" for n in range(11)] + ["final.png"]
    positions = [html.index(f'data-name="{name}"') for name in names]
    assert positions == sorted(positions)
    assert html.count("data-step=") == 12  # the row image is a training copy, not shown as evidence


def test_the_screenshot_count_reads_as_english_for_none_one_and_many(viewer_client, imported):
    html = viewer_client.get(imported.get_absolute_url()).content.decode()
    assert "· 12 screenshots, each captioned with the action the agent took from it" in html
    bare = viewer_client.get(EpisodeFactory().get_absolute_url()).content.decode()
    assert "· no screenshots</span>" in bare and "0 screenshot" not in bare and "each is captioned" not in bare
    one = EpisodeFactory()
    Screenshot.objects.create(episode=one, kind="final", step=0, name="final.png",
                              blob=imported.screenshots.first().blob)
    assert "· 1 screenshot, captioned with" in viewer_client.get(one.get_absolute_url()).content.decode()


def test_the_episode_page_escapes_agent_and_website_text(viewer_client):
    episode = EpisodeFactory(
        answer=f"answer {SCRIPT}", screen_text=["first", f"screen {SCRIPT}"],
        actions=[{"type": {"text": SCRIPT}}],
        request_log=[{"method": "POST", "path": f"/p{SCRIPT}", "query": {"q": SCRIPT}, "body": {"b": SCRIPT},
                      "status": 200}, {"method": "POST", "path": "/raw", "body": SCRIPT, "status": 200}],
        data_changes=[{"collection": SCRIPT, "op": "update", "changed": {"name": SCRIPT}}],
        task=TaskFactory(instruction=f"Do {SCRIPT}"), extra={"import_skipped": [f"run/x/final.png: {SCRIPT}"]},
    )
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "<script>alert" not in html
    assert html.count("&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;") >= 8
    assert "screen &lt;script&gt;" in html and "answer &lt;script&gt;" in html


def test_a_markdown_answer_is_rendered_and_its_raw_html_stays_text(viewer_client):
    answer = ("**24 interactions** <b>bold</b> <img src=x onerror=alert(1)>\n\n- ethanol ⇄ sildenafil\n\n"
              "| drug | level |\n|---|---|\n| ethanol | major |\n\n[bad](javascript:alert(1)) [ok](https://x.org)")
    episode = EpisodeFactory(answer=answer, screen_text=["I now have the answer; submitting."])
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "<strong>24 interactions</strong>" in html and "<li>ethanol ⇄ sildenafil</li>" in html
    assert "<td>major</td>" in html and "&lt;b&gt;bold&lt;/b&gt;" in html and "<img src=x" not in html
    assert 'href="javascript' not in html and 'href="https://x.org" rel="nofollow noopener noreferrer"' in html
    assert "Last recorded text (not necessarily the page)" in html and "last thought" in html


def test_a_json_page_seen_last_shows_as_json_text(viewer_client):
    episode = EpisodeFactory(screen_text=["home", {"json": "page"}])
    html = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert json.dumps({"json": "page"}).replace('"', "&quot;") in html and "Screen text at the end" in html


def test_a_runs_episodes_are_paginated_in_task_file_order(viewer_client):
    run = RunFactory(name="big-run")
    for order in range(120, 0, -1):
        EpisodeFactory(run=run, task_order=order)
    first = viewer_client.get(run.get_absolute_url()).content.decode()
    assert "120 episodes" in first and "page 1 of 3" in first
    last = viewer_client.get(run.get_absolute_url() + "?page=3").content.decode()
    assert last.count('<td class="num">1') >= 1 and "page 3 of 3" in last
    assert viewer_client.get(run.get_absolute_url() + "?page=nope").status_code == 200


def test_the_run_pages_make_a_fixed_number_of_queries(viewer_client, django_assert_max_num_queries):
    run = RunFactory()
    for _ in range(30):
        EpisodeFactory(run=run)
    # fixed: the ids of the page, then its rows, flags and screens; on PostgreSQL the count comes from validate's
    # summary, brought up to date first (as many queries for a handful of changed episodes as for thousands)
    with django_assert_max_num_queries(24):
        viewer_client.get(run.get_absolute_url())
    with django_assert_max_num_queries(12):
        viewer_client.get("/")


def test_the_runs_page_says_what_to_do_when_empty(viewer_client):
    assert "taskgen import RUN_DIR" in viewer_client.get("/").content.decode()


def test_an_imported_run_shows_its_counts(viewer_client, imported):
    html = viewer_client.get("/").content.decode()
    assert imported.run.name in html and imported.run.source_dir in html
    run_html = viewer_client.get(imported.run.get_absolute_url()).content.decode()
    assert "shop-a" in run_html and '<td class="num">12</td>' in run_html  # 11 steps and the final screen
