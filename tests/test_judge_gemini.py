"""The gemini judge through the real google-genai SDK against a fake Gemini server on 127.0.0.1."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from PIL import Image

from taskgen.models import Episode, Judgment
from taskgen.stages.import_.service import import_run_dir
from taskgen.stages.judge import images as judge_images
from taskgen.stages.judge.images import image_copy_path, image_policy
from taskgen.stages.judge.prompt import judge_prompt
from taskgen.stages.judge.service import JudgeError, episodes_to_judge, judge_config_for, judge_episode
from tests.factories import RunFactory
from tests.fakes.gemini_server import DEFAULT_ANSWER, FakeGemini, inline_bytes, prompt_tokens
from tests.judge_helpers import (
    DATA_CHANGES,
    EXPECTED_ACTIONS,
    EXPECTED_CHANGES,
    EXPECTED_REQUESTS,
    FINAL_COLOUR,
    add_screenshots,
    screenshot_png,
    shop_episode,
    step_colour,
)
from tests.rundirs import build_run


@pytest.fixture
def fake_gemini(settings):
    server = FakeGemini(retry_hint=0.3, stall=2.0).start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    settings.JUDGE_TIMEOUT_SECONDS = 0.5
    settings.JUDGE_RETRY_BASE_SECONDS = 0.01
    settings.JUDGE_RETRY_MAX_SECONDS = 0.05
    settings.JUDGE_MAX_ATTEMPTS = 4
    settings.REDIS_URL = ""  # the database rate limit; the Redis one is tested on its own
    yield server
    server.stop()


def _judge(episode, **config) -> Judgment:
    config = judge_config_for("gemini", config.get("model"), None, config.get("image_policy"))
    return judge_episode(episode_id=episode.pk, config_id=config.pk)


def _centre_colour(part: dict) -> tuple[int, ...]:
    data = inline_bytes(part["inlineData"]["data"])
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB").getpixel((image.width // 2, image.height - 5))


def _close(a, b) -> bool:
    return all(abs(x - y) <= 12 for x, y in zip(a, b, strict=True))


def test_the_sdk_sends_the_reference_evidence_images_in_order_and_json_mode(db, fake_gemini):
    episode = shop_episode()
    add_screenshots(episode, steps=12, size=(640, 400))
    judgment = _judge(episode)
    [sent] = fake_gemini.requests
    assert sent["model"] == "gemini-3.5-flash" and sent["headers"]["x-goog-api-key"] == "test-key-not-real"
    body = sent["body"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["systemInstruction"]["parts"][0]["text"] == judge_prompt().system
    parts = body["contents"][0]["parts"]
    prompt = parts[0]["text"]
    for line in EXPECTED_REQUESTS + EXPECTED_CHANGES + EXPECTED_ACTIONS + ["Added the red mug to the cart."]:
        assert line in prompt
    assert "\n".join(EXPECTED_REQUESTS) in prompt  # one line each, in log order
    expected = [step_colour(s) for s in (0, 1, 5, 6, 7, 8, 9, 10, 11)] + [FINAL_COLOUR]
    assert len(parts) == 11
    assert all(_close(_centre_colour(p), c) for p, c in zip(parts[1:], expected, strict=True))
    assert judgment.verdict == "SUCCESS" and judgment.parts == DEFAULT_ANSWER["parts"]
    assert judgment.input_tokens > 0 and judgment.output_tokens > 0 and judgment.cost_usd > 0
    assert judgment.image_bytes > 0 and len(judgment.request_hash) == 64 and not judgment.inconsistent


def test_the_default_policy_sends_the_stored_bytes_and_lets_gemini_cut_image_tokens(db, fake_gemini):
    episode = shop_episode()
    add_screenshots(episode, steps=2)
    medium = _judge(episode)
    full = _judge(episode, image_policy="full")
    assert (medium.config.image_policy, full.config.image_policy) == ("medium", "full")
    bodies = [r["body"] for r in fake_gemini.requests]
    assert bodies[0]["generationConfig"]["mediaResolution"] == "MEDIA_RESOLUTION_MEDIUM"
    assert "mediaResolution" not in bodies[1]["generationConfig"]
    sent = [b["contents"][0]["parts"][1]["inlineData"] for b in bodies]
    assert inline_bytes(sent[0]["data"]) == inline_bytes(sent[1]["data"])  # the stored PNG, not re-encoded
    assert medium.request_hash != full.request_hash  # same bytes, other tokens: never answered from the cache
    image_medium, image_full = (prompt_tokens(b)[1] for b in bodies)
    assert image_medium <= 0.6 * image_full
    assert full.input_tokens - medium.input_tokens == image_full - image_medium


def test_the_small_policy_sends_the_copy_made_when_the_screenshot_was_stored(db, fake_gemini, tmp_path,
                                                                             monkeypatch, settings):
    settings.JUDGE_IMAGE_COPIES = ("small",)  # the default for a provider without media_resolution
    run_dir = build_run(tmp_path, ["shop-a"], steps=2)
    for shot in [*run_dir.glob("shop-a/screenshots/*.png"), run_dir / "shop-a" / "final.png"]:
        shot.write_bytes(screenshot_png((30, 90, 200), (1280, 800), shot.name))
    import_run_dir(run_dir=run_dir)
    episode = Episode.objects.get(task__task_id="shop-a")
    for shot in episode.screenshots.exclude(kind="row"):
        assert image_copy_path(shot.blob.sha256, image_policy("small")).exists()

    def no_decoding(*args, **kwargs):
        raise AssertionError("the judge decoded an image")

    monkeypatch.setattr(judge_images, "downscaled", no_decoding)
    judgment = _judge(episode, image_policy="small")
    [sent] = [r["body"]["contents"][0]["parts"][1]["inlineData"] for r in fake_gemini.requests]
    with Image.open(io.BytesIO(inline_bytes(sent["data"]))) as image:
        assert (image.format, image.size) == ("WEBP", (768, 480))
    assert (sent.get("mimeType") or sent.get("mime_type")) == "image/webp"
    assert "mediaResolution" not in fake_gemini.requests[0]["body"]["generationConfig"]
    assert judgment.verdict == "SUCCESS"


def test_a_screenshot_stored_before_its_copy_was_asked_for_gets_it_at_its_first_judgment(db, fake_gemini):
    episode = shop_episode()
    add_screenshots(episode, steps=1, final=False)
    blob = episode.screenshots.get().blob
    assert not image_copy_path(blob.sha256, image_policy("default")).exists()
    _judge(episode, image_policy="default")
    with Image.open(image_copy_path(blob.sha256, image_policy("default"))) as image:
        assert (image.format, max(image.size)) == ("WEBP", 1024)


def test_a_429_is_retried_no_sooner_than_the_servers_hint(db, fake_gemini):
    fake_gemini.script(["429", "ok"])
    judgment = _judge(shop_episode())
    first, second = fake_gemini.requests
    assert second["at"] - first["at"] >= 0.3
    assert judgment.verdict == "SUCCESS"


def test_a_503_and_a_timeout_are_retried(db, fake_gemini):
    fake_gemini.script(["503", "timeout", "ok"])
    judgment = _judge(shop_episode())
    assert [r["fault"] for r in fake_gemini.requests] == ["503", "timeout", "ok"]
    assert judgment.verdict == "SUCCESS" and judgment.error == ""


def test_a_server_that_keeps_failing_leaves_no_verdict_with_the_error(db, fake_gemini):
    fake_gemini.script(["503"] * 4)
    judgment = _judge(shop_episode())
    assert len(fake_gemini.requests) == 4
    assert judgment.verdict == "NONE" and "503" in judgment.error


def test_a_non_json_answer_is_stored_as_no_verdict_then_judged_again_next_pass(db, fake_gemini):
    fake_gemini.script(["non_json"] * 3)
    episode = shop_episode()
    first = _judge(episode)
    assert len(fake_gemini.requests) == 3  # asked again twice in the pass, as the reference does
    assert first.verdict == "NONE" and first.raw_response == "I think the agent did it, mostly."
    assert first.error == "answer is not JSON"
    assert episodes_to_judge(run=episode.run, config=first.config) == [episode.pk]
    second = _judge(episode)
    assert (second.pk, second.verdict) == (first.pk, "SUCCESS")
    assert Judgment.objects.filter(episode=episode).count() == 1
    assert episodes_to_judge(run=episode.run, config=first.config) == []


def test_a_fenced_json_answer_is_read(db, fake_gemini):
    fake_gemini.script(["fenced"])
    judgment = _judge(shop_episode())
    assert judgment.verdict == "SUCCESS" and judgment.raw_response.startswith("Here is my judgment")


def test_an_answer_without_a_verdict_keeps_its_parts_and_raw_text(db, fake_gemini):
    fake_gemini.script(["no_verdict"] * 3)
    judgment = _judge(shop_episode())
    assert judgment.verdict == "NONE" and judgment.error == "answer has no verdict"
    assert json.loads(judgment.raw_response) == {"parts": DEFAULT_ANSWER["parts"]}


def test_success_with_a_part_not_done_is_flagged_inconsistent(db, fake_gemini):
    fake_gemini.answer = lambda body: {"parts": [{"part": "add to cart", "done": False, "evidence": "no change"}],
                                       "verdict": "SUCCESS"}
    judgment = _judge(shop_episode())
    assert judgment.verdict == "SUCCESS" and judgment.inconsistent


def test_a_stored_verdict_is_never_asked_again(db, fake_gemini):
    episode = shop_episode()
    first = _judge(episode)
    again = _judge(episode)
    assert again.pk == first.pk and len(fake_gemini.requests) == 1


def test_an_identical_request_is_answered_from_the_cache_at_no_cost(db, fake_gemini):
    one, two = shop_episode(), shop_episode()  # the same goal and evidence in two runs
    paid = _judge(one)
    cached = _judge(two)
    assert len(fake_gemini.requests) == 1
    assert cached.request_hash == paid.request_hash and cached.source == "cache"
    assert cached.verdict == paid.verdict and cached.cost_usd == 0 and paid.cost_usd > 0


def test_an_answer_that_arrived_but_was_not_stored_is_recorded_next_time_without_paying_again(db, fake_gemini,
                                                                                             monkeypatch):
    from django.db import OperationalError

    from taskgen.models import JudgeAnswer
    from taskgen.stages.judge import service

    episode = shop_episode()
    store = service.judgment_store

    def database_gone(**kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr(service, "judgment_store", database_gone)
    with pytest.raises(OperationalError):  # the answer came; the database went away before it was stored
        _judge(episode)
    assert JudgeAnswer.objects.count() == 1
    monkeypatch.setattr(service, "judgment_store", store)
    judgment = _judge(episode)
    assert len(fake_gemini.requests) == 1  # paid once
    assert judgment.verdict == "SUCCESS" and judgment.source == "judge" and judgment.cost_usd > 0
    assert judgment.input_tokens > 0 and not JudgeAnswer.objects.exists()  # recorded: no longer kept


def test_a_judgment_outside_a_transaction_opens_none_of_its_own(transactional_db, fake_gemini, monkeypatch):
    """Each of a judgment's writes (the answer kept, the judgment, the answer forgotten) is one statement: a
    transaction around any of them adds a BEGIN and a COMMIT, two more round trips to the database per judgment."""
    from django.db.transaction import Atomic

    from taskgen.models import JudgeAnswer
    from taskgen.stages.judge import service

    episode = shop_episode()
    judge_config_for("gemini", None, None, None)
    monkeypatch.setattr(service, "rate_limit_acquire", lambda **kwargs: None)  # its window has a transaction
    entered = []
    enter = Atomic.__enter__
    monkeypatch.setattr(Atomic, "__enter__", lambda self: entered.append(self) or enter(self))
    judgment = _judge(episode)
    assert judgment.verdict == "SUCCESS" and judgment.source == "judge" and not JudgeAnswer.objects.exists()
    assert entered == []


def test_a_judgment_reads_its_episode_once_and_only_the_evidence_fields(db, fake_gemini):
    """One query reads the episode (with whether it has a verdict) and only the fields the evidence is made of; a
    field left out but read later would cost a query of its own, every judgment."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    episode = shop_episode()
    Episode.objects.filter(pk=episode.pk).update(rows_jsonl='{"step": 0}\n' * 1000, extra={"big": "x" * 10000})
    judge_config_for("gemini", None, None, None)
    with CaptureQueriesContext(connection) as queries:
        judgment = _judge(episode)
    read = [q["sql"] for q in queries.captured_queries if 'FROM "taskgen_episode"' in q["sql"]]
    assert judgment.verdict == "SUCCESS"
    assert len(read) == 1 and "rows_jsonl" not in read[0] and '"extra"' not in read[0]


def test_a_judgment_stored_twice_inside_a_transaction_keeps_the_first_and_the_transaction(db, fake_gemini):
    """Inside a transaction (the batch API's polls store judgments in one), an insert another worker won is undone
    to a savepoint: the stored verdict is kept and returned, and the transaction goes on."""
    from taskgen.models import JudgeAnswer
    from taskgen.stages.judge import service

    episode = shop_episode()
    config = judge_config_for("gemini", None, None, None)
    first = _judge(episode)
    again = service.judgment_store(episode_id=episode.pk, config_id=config.pk,
                                   fields={"verdict": "FAILURE", "source": "judge"})
    assert again.pk == first.pk and again.verdict == first.verdict == "SUCCESS"
    answer = {"request_hash": "h" * 64, "model": config.model, "text": "{}"}
    service._answer_keep(JudgeAnswer(**answer))
    service._answer_keep(JudgeAnswer(**answer))  # another worker kept the same answer first
    assert JudgeAnswer.objects.count() == 1 and Judgment.objects.count() == 1  # and the transaction still works


def test_gemini_without_a_key_is_refused_clearly(db, settings):
    settings.GEMINI_API_KEY = ""
    with pytest.raises(JudgeError, match="GEMINI_API_KEY"):
        judge_config_for("gemini")


def test_a_users_prompt_file_is_used_with_its_own_version(db, fake_gemini, settings, tmp_path):
    mine = tmp_path / "my_judge.txt"
    mine.write_text("version: lab-v7\n=== system ===\nBe strict.\n=== prompt ===\nGoal: $task\nAnswer: $answer\n")
    settings.JUDGE_PROMPT_FILE = str(mine)
    judgment = _judge(shop_episode())
    assert judgment.config.prompt_version == "lab-v7"
    body = fake_gemini.requests[0]["body"]
    assert body["systemInstruction"]["parts"][0]["text"] == "Be strict."
    assert body["contents"][0]["parts"][0]["text"].startswith("Goal: Search for the red mug")


def test_model_output_is_escaped_on_the_episode_page(db, fake_gemini, viewer_client):
    fake_gemini.answer = lambda body: {"parts": [{"part": "<script>alert(1)</script>", "done": True,
                                                  "evidence": "<img src=x onerror=alert(2)>"}], "verdict": "SUCCESS"}
    episode = shop_episode(data_changes=DATA_CHANGES[:1])  # see note in judge_helpers
    _judge(episode)
    page = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


def test_a_provider_without_media_resolution_gets_the_downscaled_copy_by_default(db, settings):
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = "http://127.0.0.1:9/v1", "qwen-test"
    assert judge_config_for("openai-compatible").image_policy == "small"
    with pytest.raises(JudgeError, match="media_resolution"):
        judge_config_for("openai-compatible", None, None, "medium")


def test_the_cli_keeps_its_workers_calls_in_flight_and_never_more(transactional_db, fake_gemini, settings):
    """--workers 8: 8 calls in flight, never more, though more threads than that prepare the next episodes."""
    fake_gemini.latency, settings.JUDGE_TIMEOUT_SECONDS = 1.0, 20
    run = RunFactory(name="sandbox-threads")
    for i in range(16):
        shop_episode(run=run, instruction=f"Search for the red mug number {i} and add it to the cart")
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "judge", "sandbox-threads", "--provider", "gemini", "--workers", "8", stdout=out,
                 stderr=err)
    assert json.loads(out.getvalue().strip().splitlines()[-1])["success"] == 16, err.getvalue()
    assert "threads, 8 calls in flight" in err.getvalue()
    assert 5 <= fake_gemini.peak_in_flight <= 8  # at least 5 of 8 on a busy machine


def test_the_cache_lookup_reads_its_index_in_id_order_on_a_table_without_statistics(db):
    """The first judgment of the very same request (asked at every judgment) on a judgment table just filled, no
    ANALYZE yet: with the index on request_hash alone, PostgreSQL walked the primary key in id order, filtering every
    judgment (7 ms a judgment at 18,000 judgments), instead of reading the few that share the hash."""
    from django.db import connection

    from taskgen.models import JudgeConfig
    from taskgen.stages.judge.service import CACHE_SQL
    from tests.factories import EpisodeFactory

    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL query plan")
    episodes = [EpisodeFactory() for _ in range(40)]
    configs = JudgeConfig.objects.bulk_create(JudgeConfig(provider="gemini", model=f"m{n}") for n in range(500))
    Judgment.objects.bulk_create(Judgment(episode=episode, config=config, verdict="SUCCESS",
                                          request_hash=f"{episode.pk:032d}{config.pk:032d}")
                                 for episode in episodes for config in configs)
    quote = connection.ops.quote_name
    sql = CACHE_SQL.format(judgment=quote(Judgment._meta.db_table), answer=quote("taskgen_judgeanswer"))
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, ["f" * 64, "NONE", "f" * 64])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "judgment_request_first" in plan and "taskgen_judgment_pkey" not in plan, plan
