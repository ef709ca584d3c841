"""A judge run through Gemini's Batch API on the engine: one unit per episode, one job for the run's open units,
polled without holding a worker slot, collected once, at half price; failed jobs, error answers, cancel and resume
through the units. The engine's worker is called in this process; Gemini is the fake on 127.0.0.1."""
from __future__ import annotations

import importlib
import threading
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from taskgen.engine.contract import RetryLater, StageParamsError
from taskgen.engine.stage_table import ENGINE_STAGES
from taskgen.engine.worker import work
from taskgen.models import JudgeBatchJob, Judgment, PipelineRun, WorkUnit
from taskgen.stages.begin import pipeline_run_cancel, pipeline_run_resume, stage_start
from taskgen.stages.judge.batch import batch_states_forget, judge_batch_job_poll, judge_batch_unit
from taskgen.stages.judge.service import _cost, judge_config_for
from taskgen.stages.judge.work import JUDGE_WORK, judge_params_check
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import add_screenshots, shop_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_gemini(settings, monkeypatch):
    server = FakeGemini().start()
    settings.GEMINI_API_KEY = "test-key-not-real"
    settings.GOOGLE_GEMINI_BASE_URL = server.base_url
    settings.REDIS_URL = ""
    settings.JUDGE_BATCH_POLL_SECONDS = 30
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda *args, **kwargs: None)  # no broker
    batch_states_forget()
    yield server
    server.stop()
    batch_states_forget()


def _run_with(count: int):
    run = RunFactory()
    return run, [shop_episode(run=run, instruction=f"Search for mug {i} and add it") for i in range(count)]


def _batch_run(run) -> PipelineRun:
    """Started as the web form does (the batch checkbox ticked)."""
    return stage_start(stage="judge", params={"run": run.pk, "provider": "gemini", "batch": True}, user=None)


def _work(pipeline_run: PipelineRun) -> float | None:
    """A worker's slice now, as if every waiting unit had come due (and the job's state was not read lately)."""
    WorkUnit.objects.filter(pipeline_run=pipeline_run, status="queued").update(not_before=None)
    batch_states_forget()
    return work(pipeline_run_id=pipeline_run.pk, owner="test-worker")


def _gets(fake: FakeGemini) -> int:
    return len(fake.polls)


def _creates(fake: FakeGemini) -> list[list]:
    return [r["body"]["batch"]["inputConfig"]["requests"]["requests"] for r in fake.requests
            if r["path"].endswith(":batchGenerateContent")]


def test_a_batch_run_is_a_unit_per_episode_and_its_progress_and_summary_come_from_them(fake_gemini):
    run, episodes = _run_with(3)
    pipeline_run = _batch_run(run)
    assert pipeline_run.total == 3 and pipeline_run.params["batch"] is True
    assert sorted(pipeline_run.units.values_list("key", flat=True)) == sorted(str(e.pk) for e in episodes)
    work(pipeline_run_id=pipeline_run.pk, owner="test-worker")
    [inlined] = _creates(fake_gemini)
    assert len(inlined) == 3 and inlined[0]["request"]["generationConfig"]["responseMimeType"] == "application/json"
    assert "GET /sites/shop/search" in inlined[0]["request"]["contents"][0]["parts"][0]["text"]
    assert not Judgment.objects.exists() and PipelineRun.objects.get(pk=pipeline_run.pk).done == 0
    assert _work(pipeline_run) is None
    finished = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (finished.status, finished.done, finished.failed, finished.result["episodes"]) == ("done", 3, 0, 3)
    assert set(finished.units.values_list("status", "result")) == {("done", "SUCCESS")}
    judgments = list(Judgment.objects.filter(config=judge_config_for("gemini")))
    assert {j.episode_id for j in judgments} == {e.pk for e in episodes}
    assert all(j.source == "batch" and j.input_tokens > 0 and len(j.request_hash) == 64 for j in judgments)
    one = judgments[0]
    assert one.cost_usd == (_cost(one.config.model, one.input_tokens, one.output_tokens) * Decimal("0.5")).quantize(
        Decimal("0.000001"))


def test_polling_a_running_job_frees_the_worker_without_spending_attempts(fake_gemini):
    fake_gemini.batch_polls = 5
    run, _ = _run_with(3)
    pipeline_run = _batch_run(run)
    again_in = work(pipeline_run_id=pipeline_run.pk, owner="test-worker")
    assert again_in is not None and 20 < again_in <= 30  # the slice ends; the units come due at the next poll
    assert _gets(fake_gemini) == 1  # three units polled together: one call
    for unit in pipeline_run.units.all():
        assert (unit.status, unit.attempts, unit.lease_owner) == ("queued", 0, "")
        assert unit.not_before > timezone.now() and "JOB_STATE_RUNNING" in unit.last_error
    _work(pipeline_run)
    assert _gets(fake_gemini) == 2 and len(_creates(fake_gemini)) == 1  # polled again, never submitted again
    assert set(pipeline_run.units.values_list("attempts", flat=True)) == {0}


def test_a_failed_job_fails_the_units_with_its_state_after_their_attempts_and_resume_sends_exactly_them(
        fake_gemini, monkeypatch):
    monkeypatch.setitem(ENGINE_STAGES, "judge", replace(JUDGE_WORK, max_attempts=2))
    fake_gemini.batch_polls, fake_gemini.batch_final_state = 0, "BATCH_STATE_FAILED"
    run, episodes = _run_with(3)
    pipeline_run = _batch_run(run)
    _work(pipeline_run)
    assert set(pipeline_run.units.values_list("status", "attempts")) == {("queued", 1)}
    _work(pipeline_run)
    failed = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (failed.status, failed.done, failed.failed, failed.result["errors"]) == ("done", 0, 3, 3)
    assert len(_creates(fake_gemini)) == 2  # each try sent one job for all three
    for unit in failed.units.all():
        assert unit.status == "failed" and "JOB_STATE_FAILED" in unit.last_error and "after 2 tries" in unit.last_error
    late = shop_episode(run=run, instruction="Search for the blue mug and add it")  # not a unit of this run
    fake_gemini.batch_final_state = "BATCH_STATE_SUCCEEDED"
    pipeline_run_resume(pipeline_run=failed, user=None)
    _work(pipeline_run)
    resent = _creates(fake_gemini)[-1]
    assert sorted(int(r["metadata"]["key"]) for r in resent) == sorted(e.pk for e in episodes)
    done = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (done.status, done.done, done.failed) == ("done", 3, 0)
    assert not Judgment.objects.filter(episode=late).exists()


def test_an_answer_with_an_error_fails_only_its_episode_and_its_next_try_sends_it_again(fake_gemini):
    fake_gemini.batch_polls = 0
    run, episodes = _run_with(3)
    pipeline_run = _batch_run(run)
    fake_gemini.script(["ok", "ok", "503"])  # the job's creation, then one fault per answer, in request order
    _work(pipeline_run)
    second = WorkUnit.objects.get(pipeline_run=pipeline_run, key=str(episodes[1].pk))
    assert (second.status, second.attempts) == ("queued", 1) and "fake unavailable" in second.last_error
    assert set(pipeline_run.units.exclude(pk=second.pk).values_list("status", flat=True)) == {"done"}
    assert _work(pipeline_run) is None
    assert [int(r["metadata"]["key"]) for r in _creates(fake_gemini)[-1]] == [episodes[1].pk]
    finished = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (finished.status, finished.done, finished.failed) == ("done", 3, 0)
    assert Judgment.objects.filter(verdict="SUCCESS").count() == 3


def test_a_run_larger_than_a_jobs_inline_size_is_sent_as_several_jobs(fake_gemini, settings):
    fake_gemini.batch_polls = 0
    run, episodes = _run_with(3)
    for episode in episodes:
        add_screenshots(episode, steps=1, final=False, size=(64, 64))
    settings.JUDGE_BATCH_JOB_BYTES = 1  # every episode's screenshot is more: a job each
    pipeline_run = _batch_run(run)
    assert _work(pipeline_run) is None
    assert sorted(int(r["metadata"]["key"]) for [r] in _creates(fake_gemini)) == sorted(e.pk for e in episodes)
    assert len(fake_gemini.polls) == 3 and PipelineRun.objects.get(pk=pipeline_run.pk).done == 3
    assert set(JudgeBatchJob.objects.values_list("state", flat=True)) == {"collected"}


@pytest.mark.django_db(transaction=True)
def test_units_reaching_the_submission_together_send_one_job(fake_gemini):
    fake_gemini.latency, fake_gemini.batch_polls = 1.0, 5  # a slow submission: the other unit arrives meanwhile
    run, episodes = _run_with(2)
    pipeline_run = _batch_run(run)
    config_id = pipeline_run.params["config_id"]
    outcomes = []

    def unit(episode_id: int) -> None:
        try:
            judge_batch_unit(pipeline_run=pipeline_run, config_id=config_id, episode_id=episode_id)
        except RetryLater as later:
            outcomes.append(later.reason)
        finally:
            connection.close()

    threads = [threading.Thread(target=unit, args=(e.pk,)) for e in episodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(fake_gemini.batches) == 1 and len(outcomes) == 2
    [job] = JudgeBatchJob.objects.all()
    assert sorted(job.requests.values_list("episode_id", flat=True)) == sorted(e.pk for e in episodes)


def test_collecting_a_job_twice_stores_each_judgment_once(fake_gemini):
    fake_gemini.batch_polls = 0
    run, _ = _run_with(2)
    pipeline_run = _batch_run(run)
    _work(pipeline_run)
    [job] = JudgeBatchJob.objects.filter(pipeline_run=pipeline_run)
    assert job.state == "collected" and Judgment.objects.count() == 2
    JudgeBatchJob.objects.filter(pk=job.pk).update(state="running")  # as if its end had not been recorded
    fake_gemini.answer = lambda body: {"parts": [], "verdict": "NOT SUCCESS"}
    batch_states_forget()
    judge_batch_job_poll(job=JudgeBatchJob.objects.get(pk=job.pk), config_id=pipeline_run.params["config_id"])
    assert Judgment.objects.count() == 2
    assert set(Judgment.objects.values_list("verdict", flat=True)) == {"SUCCESS"}  # the first verdicts stand


def test_cache_hits_are_stored_at_once_and_not_sent(fake_gemini):
    fake_gemini.batch_polls = 0
    paid = shop_episode()
    first = _batch_run(paid.run)
    _work(first)
    twin = shop_episode()  # the same goal and evidence in another run
    new = shop_episode(run=twin.run, instruction="Search for the green mug and add it")
    second = _batch_run(twin.run)
    _work(second)
    assert [[int(r["metadata"]["key"]) for r in sent] for sent in _creates(fake_gemini)] == [[paid.pk], [new.pk]]
    assert Judgment.objects.get(episode=twin).source == "cache"
    assert PipelineRun.objects.get(pk=second.pk).done == 2


def test_a_run_cancelled_while_its_job_runs_stops_polling_and_resume_collects_the_same_job(fake_gemini):
    fake_gemini.batch_polls = 50
    run, _ = _run_with(2)
    pipeline_run = _batch_run(run)
    _work(pipeline_run)
    assert pipeline_run_cancel(pipeline_run=pipeline_run)
    assert set(pipeline_run.units.values_list("status", flat=True)) == {"cancelled"}
    assert _work(pipeline_run) is None and _gets(fake_gemini) == 1 and not Judgment.objects.exists()
    [name] = fake_gemini.batches
    fake_gemini.batches[name]["polls_left"] = 0  # the job finishes meanwhile
    pipeline_run_resume(pipeline_run=PipelineRun.objects.get(pk=pipeline_run.pk), user=None)
    _work(pipeline_run)
    done = PipelineRun.objects.get(pk=pipeline_run.pk)
    assert (done.status, done.done) == ("done", 2) and len(fake_gemini.batches) == 1


def test_the_pages_batch_box_starts_a_batch_run_of_units_whose_page_shows_its_progress(fake_gemini,
                                                                                       admin_client_role):
    run, _ = _run_with(2)
    form = {"run": run.pk, "provider": "gemini", "model": "", "prompt_version": "judge-v1", "image_policy": "",
            "batch": "on"}
    response = admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), form)
    pipeline_run = PipelineRun.objects.get()
    assert response["Location"] == pipeline_run.get_absolute_url()
    assert pipeline_run.params["batch"] is True and pipeline_run.units.count() == 2
    fake_gemini.batch_polls = 5
    work(pipeline_run_id=pipeline_run.pk, owner="test-worker")
    page = admin_client_role.get(pipeline_run.get_absolute_url()).content.decode()
    assert "0 done of 2" in page
    assert "<code>batches/fake-1</code></td><td>2</td><td>running</td>\n  <td>JOB_STATE_RUNNING</td>" in page
    assert "a job already sent keeps running at Gemini and is\nbilled" in page  # what cancel does, before one cancels


def test_a_batch_run_is_gemini_only(fake_gemini):
    run, _ = _run_with(1)
    with pytest.raises(StageParamsError, match="provider 'rules' cannot judge a run through a batch API: use one of "
                                               "gemini, or judge without batch"):
        judge_params_check({"run": run.pk, "provider": "rules", "batch": True})


def test_a_batch_run_of_the_old_path_left_running_is_closed_by_the_migration():
    legacy = PipelineRun.objects.create(stage="judge", status="running", params={"batch": True, "batch_name": "b/1"})
    other = PipelineRun.objects.create(stage="judge", status="running", params={"batch": False})
    importlib.import_module("taskgen.migrations.0008_judge_batch_jobs").close_legacy_batch_runs(apps, None)
    legacy.refresh_from_db()
    assert legacy.status == "failed" and "start the judge again with batch" in legacy.errors[-1]
    assert PipelineRun.objects.get(pk=other.pk).status == "running"


def _work_until_finished(pipeline_run: PipelineRun, slices: int = 6) -> PipelineRun:
    for _ in range(slices):
        _work(pipeline_run)
        if (done := PipelineRun.objects.get(pk=pipeline_run.pk)).is_finished:
            return done
    return PipelineRun.objects.get(pk=pipeline_run.pk)


def _sender_dies(monkeypatch, pipeline_run: PipelineRun, *, after_gemini_took_it: bool) -> None:
    """A worker slice whose job sender dies (here: its try raises) just after Gemini took the job, or just before;
    the database is left as a killed worker leaves it: the job recorded as being sent, its requests open."""
    from taskgen.stages.judge import batch

    real = batch._send

    def send(*args, **kwargs):
        if after_gemini_took_it:
            real(*args, **kwargs)
        raise RuntimeError("worker killed before it recorded the job")

    monkeypatch.setattr(batch, "_send", send)
    _work(pipeline_run)
    monkeypatch.setattr(batch, "_send", real)


def test_a_job_whose_sender_died_after_gemini_took_it_is_found_again_and_never_sent_twice(fake_gemini, monkeypatch):
    run, _ = _run_with(2)
    pipeline_run = _batch_run(run)
    _sender_dies(monkeypatch, pipeline_run, after_gemini_took_it=True)
    [job] = JudgeBatchJob.objects.all()
    assert job.state == "submitting" and job.display_name.startswith(f"taskgen-judge-{pipeline_run.pk}-")
    _work(pipeline_run)  # its sender may still be at work: the units wait, nothing is sent again
    assert JudgeBatchJob.objects.get().state == "submitting" and len(_creates(fake_gemini)) == 1
    JudgeBatchJob.objects.update(created_at=timezone.now() - timedelta(hours=1))
    done = _work_until_finished(pipeline_run)
    assert (done.status, done.done) == ("done", 2)
    job = JudgeBatchJob.objects.get()
    assert (job.name, job.state) == ("batches/fake-1", "collected") and len(_creates(fake_gemini)) == 1
    assert Judgment.objects.filter(source="batch").count() == 2


def test_a_job_whose_sender_died_before_gemini_took_it_is_sent_again(fake_gemini, monkeypatch):
    run, _ = _run_with(2)
    pipeline_run = _batch_run(run)
    _sender_dies(monkeypatch, pipeline_run, after_gemini_took_it=False)
    assert JudgeBatchJob.objects.get().state == "submitting" and not _creates(fake_gemini)
    JudgeBatchJob.objects.update(created_at=timezone.now() - timedelta(hours=1))
    done = _work_until_finished(pipeline_run)
    assert (done.status, done.done) == ("done", 2) and len(_creates(fake_gemini)) == 1
    first, second = JudgeBatchJob.objects.order_by("pk")
    assert (first.state, first.job_state) == ("ended", "its sender died before it reached Gemini")
    assert second.state == "collected"
