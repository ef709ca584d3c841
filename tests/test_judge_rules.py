"""The offline rules baseline and the `taskgen judge` command."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from taskgen.engine.contract import NothingToDo
from taskgen.models import Judgment, PipelineRun
from taskgen.providers import ProviderRequest
from taskgen.providers.rules import LABEL, RulesProvider, goal_parts
from taskgen.stages.judge.evidence import evidence_for_episode
from taskgen.stages.judge.service import RULES_MODEL, judge_config_for, judge_episode
from tests.factories import RunFactory
from tests.fakes.gemini_server import FakeGemini
from tests.judge_helpers import DATA_CHANGES, add_screenshots, judge_here, shop_episode


def _rules(episode) -> Judgment:
    return judge_episode(episode_id=episode.pk, config_id=judge_config_for("rules").pk)


def test_goal_parts_split_at_and_then_and_commas():
    assert goal_parts("Search for the red mug and add it to the cart, then check out") == [
        "Search for the red mug", "add it to the cart", "check out"]


@pytest.mark.parametrize("goal, parts", [
    ("Book “Chambre Bleue, Reykjavík” for Inès Moreau, arriving 2027-03-09",
     ["Book “Chambre Bleue, Reykjavík” for Inès Moreau", "arriving 2027-03-09"]),
    ('Buy one "Salt, Fat, Heat" and pay', ['Buy one "Salt, Fat, Heat"', "pay"]),
    ("Star ‘Fish and Chips’ then archive it", ["Star ‘Fish and Chips’", "archive it"]),
    ("Find Florida internship programs in the Mayo Clinic College of Medicine and Science.",
     ["Find Florida internship programs in the Mayo Clinic College of Medicine and Science"]),
    ("Open Léa's message and reply", ["Open Léa's message", "reply"]),  # an apostrophe opens no quote
])
def test_goal_parts_never_split_inside_quotes_or_names(goal, parts):
    assert goal_parts(goal) == parts


def test_goal_parts_keep_a_name_the_evidence_shows_whole():
    goal = "Ship it to 12 Rue de l'Église, Lyon, with express shipping"
    assert goal_parts(goal) == ["Ship it to 12 Rue de l'Église", "Lyon", "with express shipping"]
    known = 'create orders (1042): {"address": "12 Rue de l\'Église, Lyon"}'
    assert goal_parts(goal, known) == ["Ship it to 12 Rue de l'Église, Lyon", "with express shipping"]


def test_a_part_with_no_key_word_found_says_so_in_words():
    from taskgen.providers.rules import judge_part

    part = judge_part("report the total of the order", [("request #0", "GET /sites/shop/")])
    assert part["evidence"] == (f"{LABEL}: none of its 2 key words (total, order) is in the requests, data changes "
                                "or answer") and not part["done"]


def test_rules_finds_each_parts_evidence_and_says_it_is_a_baseline(db):
    judgment = _rules(shop_episode())
    assert judgment.verdict == "SUCCESS" and judgment.config.provider == "rules"
    assert [p["done"] for p in judgment.parts] == [True, True, True]
    assert all(p["evidence"].startswith(LABEL) for p in judgment.parts)
    assert "request #2" in judgment.parts[0]["evidence"]
    assert json.loads(judgment.raw_response)["judge"] == LABEL
    assert judgment.cost_usd == 0 and judgment.input_tokens == 0


def test_an_action_goal_without_a_recorded_change_is_not_a_success(db):
    episode = shop_episode(request_log=[], data_changes=[], answer="I added it.")
    judgment = _rules(episode)
    assert judgment.verdict == "NOT SUCCESS"
    assert judgment.parts[-1] == {"part": "the site records the action", "done": False,
                                  "evidence": f"{LABEL}: 0 data changes, 0 write requests"}
    one = _rules(shop_episode(run=RunFactory(name="one"), data_changes=DATA_CHANGES[:1], request_log=[]))
    assert one.parts[-1]["evidence"] == f"{LABEL}: 1 data change, 0 write requests"


def test_rules_is_deterministic(db):
    episode = shop_episode()
    request = ProviderRequest(model=RULES_MODEL, system="", prompt="", evidence=evidence_for_episode(episode=episode))
    answers = {RulesProvider().complete(request).text for _ in range(5)}
    assert len(answers) == 1
    other = shop_episode(run=RunFactory(name="b"))  # the same evidence in another run
    assert _rules(episode).raw_response == _rules(other).raw_response == answers.pop()


def test_judging_a_run_twice_judges_only_what_has_no_verdict(db):
    run = RunFactory()
    episodes = [shop_episode(run=run), shop_episode(run=run, request_log=[], data_changes=[], answer="")]
    config = judge_config_for("rules")
    first = judge_here(run=run, config=config)
    assert (first.total, first.done) == (2, 2)
    with pytest.raises(NothingToDo, match="nothing to judge"):
        judge_here(run=run, config=config)
    assert Judgment.objects.filter(episode__in=episodes).count() == 2 and PipelineRun.objects.count() == 1


def _cli(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("taskgen", "judge", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_cli_judges_offline_with_rules_and_writes_the_reference_files(db, tmp_path, settings):
    settings.GEMINI_API_KEY = ""
    settings.JUDGE_PROVIDER = "rules"
    run = RunFactory(name="sandbox-run")
    good = shop_episode(run=run)
    shop_episode(run=run, request_log=[], data_changes=[], answer="")
    out, err = _cli("sandbox-run", "--write-dir", str(tmp_path / "sandbox-run_judge"))
    assert json.loads(out.strip().splitlines()[-1]) == {
        "episodes": 2, "success": 1, "rate": 0.5, "no_verdict": 0, "errors": 0, "judge": RULES_MODEL}
    assert "] 2/2 done, 0 failed" in err and "here with 1 thread, 1 call in flight" in err
    record = json.loads((tmp_path / "sandbox-run_judge" / f"{good.task.task_id}.json").read_text())
    assert set(record) == {"task_id", "predicted_label", "verdict", "response", "model"}
    assert (record["predicted_label"], record["verdict"], record["model"]) == (1, True, RULES_MODEL)
    assert len(list((tmp_path / "sandbox-run_judge").iterdir())) == 2


def test_cli_judging_a_judged_run_again_says_nothing_to_judge_and_makes_no_run(db, settings):
    settings.GEMINI_API_KEY, settings.JUDGE_PROVIDER = "", "rules"
    run = RunFactory(name="judged-once")
    shop_episode(run=run)
    _cli("judged-once")
    out, err = _cli("judged-once")
    assert "nothing to judge: every recorded episode of judged-once has a verdict under rules:" in err
    assert json.loads(out.strip().splitlines()[-1])["episodes"] == 1 and PipelineRun.objects.count() == 1
    RunFactory(name="empty")
    assert "nothing to judge: empty has no recorded episodes" in _cli("empty")[1]
    assert PipelineRun.objects.count() == 1


def test_cli_dry_run_prints_each_request_and_calls_nothing(db, settings):
    server = FakeGemini().start()
    try:
        settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL = "test-key", server.base_url
        run = RunFactory(name="dry")
        episode = shop_episode(run=run)
        add_screenshots(episode, steps=2, size=(64, 40))
        out, _ = _cli("dry", "--provider", "gemini", "--dry-run")
    finally:
        server.stop()
    [line] = [json.loads(x) for x in out.strip().splitlines()]
    assert set(line) == {"task_id", "system", "prompt", "images"} and line["task_id"] == episode.task.task_id
    assert len(line["images"]) == 3 and all(Path(p).is_file() for p in line["images"])
    assert "GET /sites/shop/search" in line["prompt"]
    assert server.requests == [] and not Judgment.objects.exists()


def test_cli_names_a_missing_run(db):
    with pytest.raises(SystemExit) as exit_info:
        _cli("no-such-run", "--provider", "rules")
    assert exit_info.value.code == 2


def test_cli_refuses_batch_clearly(db, capsys):
    RunFactory(name="big")
    with pytest.raises(SystemExit):
        _cli("big", "--provider", "rules", "--batch")


def test_the_episode_page_shows_each_part_with_its_baseline_evidence(db, viewer_client):
    episode = shop_episode(data_changes=DATA_CHANGES[:1])  # see note in judge_helpers
    _rules(episode)
    page = viewer_client.get(episode.get_absolute_url()).content.decode()
    assert f"rules:{RULES_MODEL}" in page and "the site records the action" in page
    assert LABEL in page and "request #2" in page


def test_failed_episodes_are_not_judged(db):
    run = RunFactory()
    shop_episode(run=run)
    shop_episode(run=run, status="failed", failure_reason="browser crashed")
    assert judge_here(run=run, config=judge_config_for("rules")).total == 1


def test_write_dir_never_writes_outside_its_folder(db, tmp_path, settings):
    settings.GEMINI_API_KEY = ""
    run = RunFactory(name="odd-ids")
    episode = shop_episode(run=run)
    episode.task.task_id = "../escape"
    episode.task.save()
    _, err = _cli("odd-ids", "--provider", "rules", "--write-dir", str(tmp_path / "out"))
    assert "skipped task id '../escape'" in err
    assert not (tmp_path / "escape.json").exists() and list((tmp_path / "out").iterdir()) == []


def test_an_action_goal_that_only_searches_needs_no_write(db):
    episode = shop_episode(instruction="Find support services jobs in Bentonville", request_log=[], data_changes=[],
                           answer="There are 4 support services jobs in Bentonville.")
    judgment = _rules(episode)
    assert judgment.verdict == "SUCCESS" and len(judgment.parts) == 1


@pytest.mark.django_db
def test_a_config_names_the_prompt_in_use_and_rules_ignores_a_model_name():
    from taskgen.stages.judge.service import JudgeError

    config = judge_config_for("rules", "gemini-3.5-flash", None, "full")
    assert (config.model, config.image_policy) == (RULES_MODEL, "none")
    with pytest.raises(JudgeError, match="prompt in use is version"):
        judge_config_for("rules", None, "v0-not-loaded", None)


def test_cli_with_workers_loads_its_provider_once_the_run_is_made_before_its_threads_start(db, settings,
                                                                                           monkeypatch):
    """The provider (google-genai: 0.3 s of CPU) is loaded once there is a run to judge, before its threads start
    (beside them, it shared the GIL with their connections and leases)."""
    from taskgen.stages.judge import command as judge_command

    settings.GEMINI_API_KEY, settings.JUDGE_PROVIDER = "", "rules"
    shop_episode(run=RunFactory(name="loaded-first"))
    order, run_start, run_wait = [], judge_command.run_start, judge_command.run_wait
    monkeypatch.setattr("taskgen.stages.judge.work.provider_load_now", lambda name: order.append(f"load {name}"))
    monkeypatch.setattr(judge_command, "run_start", lambda **kw: order.append("run") or run_start(**kw))
    monkeypatch.setattr(judge_command, "run_wait", lambda **kw: order.append("threads") or run_wait(**kw))
    _cli("loaded-first", "--workers", "1")
    assert order == ["run", "load rules", "threads"]


def test_resume_works_a_judge_run_here_as_the_judge_command_does(db, settings, monkeypatch):
    """`taskgen resume PIPELINE_RUN --workers N` of a judge run: N calls in flight with a few threads more preparing,
    its provider loading at once, as `taskgen judge --workers N` (a second machine joining a run works as the first)."""
    from taskgen.cli.resume import _threads_here
    from taskgen.concurrency import judge_threads_for
    from taskgen.engine.control import run_start
    from taskgen.stages.judge.in_flight import calls_in_flight, calls_in_flight_choose

    settings.GEMINI_API_KEY, settings.JUDGE_PROVIDER = "", "rules"
    run = RunFactory(name="resumed-here")
    shop_episode(run=run)
    pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE, params={"run": run.pk, "config_id": judge_config_for().pk})
    loaded = []
    monkeypatch.setattr("taskgen.stages.judge.work.provider_load_now", loaded.append)
    try:
        assert _threads_here(pipeline_run, 8) == judge_threads_for(8)
        assert (loaded, calls_in_flight().limit) == (["rules"], 8)
        assert _threads_here(pipeline_run, 0) == 0 and loaded == ["rules"]  # no threads here: nothing loaded
    finally:
        calls_in_flight_choose(None)
