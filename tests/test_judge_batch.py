"""Gemini's Batch API: submit, poll, collect, with the same storage and guarantees as single calls, at half price."""
from __future__ import annotations

from decimal import Decimal

import pytest

from taskgen.models import Judgment, PipelineRun
from taskgen.stages.judge.batch import judge_batch_poll
from taskgen.stages.judge.service import _cost, episodes_to_judge, judge_config_for
from taskgen.stages.judge.tasks import judge_start
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import shop_episode


@pytest.fixture
def fake_gemini(settings):
    server = FakeGemini().start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    settings.REDIS_URL = ""
    yield server
    server.stop()


def _run_with(count: int):
    run = RunFactory()
    return run, [shop_episode(run=run, instruction=f"Search for mug {i} and add it") for i in range(count)]


def test_a_batch_is_submitted_polled_and_collected_at_half_price(db, fake_gemini):
    run, episodes = _run_with(3)
    config = judge_config_for("gemini")
    pipeline_run = judge_start(run=run, config=config, batch=True)
    [create] = fake_gemini.requests
    inlined = create["body"]["batch"]["inputConfig"]["requests"]["requests"]
    assert create["path"].endswith(":batchGenerateContent") and len(inlined) == 3
    assert inlined[0]["request"]["generationConfig"]["responseMimeType"] == "application/json"
    assert "GET /sites/shop/search" in inlined[0]["request"]["contents"][0]["parts"][0]["text"]
    assert judge_batch_poll(pipeline_run_id=pipeline_run.pk) is False  # still running
    assert not Judgment.objects.exists()
    assert judge_batch_poll(pipeline_run_id=pipeline_run.pk) is True
    judgments = list(Judgment.objects.filter(config=config))
    assert {j.episode_id for j in judgments} == {e.pk for e in episodes}
    assert all(j.verdict == "SUCCESS" and j.source == "batch" and j.input_tokens > 0 for j in judgments)
    one = judgments[0]
    assert one.cost_usd == (_cost(config.model, one.input_tokens, one.output_tokens) * Decimal("0.5")).quantize(
        Decimal("0.000001"))
    finished = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (finished.status, finished.done, finished.result["episodes"]) == ("done", 3, 3)


def test_collecting_a_batch_twice_stores_each_judgment_once(db, fake_gemini):
    fake_gemini.batch_polls = 0
    run, episodes = _run_with(2)
    config = judge_config_for("gemini")
    pipeline_run = judge_start(run=run, config=config, batch=True)
    assert judge_batch_poll(pipeline_run_id=pipeline_run.pk)
    PipelineRun.objects.filter(pk=pipeline_run.pk).update(status="running")  # as if the worker died after collecting
    fake_gemini.answer = lambda body: {"parts": [], "verdict": "NOT SUCCESS"}
    assert judge_batch_poll(pipeline_run_id=pipeline_run.pk)
    assert Judgment.objects.filter(config=config).count() == 2
    assert set(Judgment.objects.values_list("verdict", flat=True)) == {"SUCCESS"}  # the first verdicts stand


def test_an_answer_without_a_verdict_is_judged_again_on_the_next_pass(db, fake_gemini):
    fake_gemini.batch_polls = 0
    run, episodes = _run_with(2)
    config = judge_config_for("gemini")
    fake_gemini.script(["ok", "non_json"])  # the create call, then the first answer of the batch
    first = judge_start(run=run, config=config, batch=True)
    judge_batch_poll(pipeline_run_id=first.pk)
    assert sorted(Judgment.objects.values_list("verdict", flat=True)) == ["NONE", "SUCCESS"]
    [left] = episodes_to_judge(run=run, config=config)
    second = judge_start(run=run, config=config, batch=True)
    assert second.total == 1
    judge_batch_poll(pipeline_run_id=second.pk)
    assert Judgment.objects.get(episode_id=left).verdict == "SUCCESS"
    assert Judgment.objects.filter(config=config).count() == 2


def test_a_failed_batch_fails_its_run_and_leaves_the_episodes_to_judge(db, fake_gemini):
    fake_gemini.batch_polls, fake_gemini.batch_final_state = 0, "BATCH_STATE_FAILED"
    run, episodes = _run_with(2)
    config = judge_config_for("gemini")
    pipeline_run = judge_start(run=run, config=config, batch=True)
    assert judge_batch_poll(pipeline_run_id=pipeline_run.pk)
    failed = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert failed.status == "failed" and "JOB_STATE_FAILED" in failed.errors[0]
    assert len(episodes_to_judge(run=run, config=config)) == 2


def test_identical_requests_in_a_batch_pass_are_answered_from_the_cache(db, fake_gemini):
    fake_gemini.batch_polls = 0
    paid = shop_episode()
    config = judge_config_for("gemini")
    first = judge_start(run=paid.run, config=config, batch=True)
    judge_batch_poll(pipeline_run_id=first.pk)
    twin = shop_episode()  # the same goal and evidence in another run
    second = judge_start(run=twin.run, config=config, batch=True)
    assert len(fake_gemini.batches) == 1 and PipelineRun.objects.get(pk=second.pk).status == "done"
    assert Judgment.objects.get(episode=twin).source == "cache"
