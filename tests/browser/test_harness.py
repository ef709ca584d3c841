"""Episodes in a real headless Chromium: known solutions pass their verifiers, evidence is the episode's own, and
`attempt` writes a reference run dir and imports it, with a crashing episode recorded as failed."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from sandbox.catalog import sandbox_tasks
from taskgen.engine.control import run_start
from taskgen.engine.wait import run_wait
from taskgen.harness.agents import ScriptedAgent
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.harness.episode import episode_run
from taskgen.models import Episode, PipelineRun, Run, Screenshot
from tests.ports import free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    """The harness keeps its browser between episodes; closing it ends its keep-alive connections to the live
    server, whose threads then release their database connections before the test database is dropped."""
    yield
    in_browser_thread(browser_close)


@pytest.fixture
def chromium(settings):
    path = settings.HARNESS_CHROMIUM
    if not (os.path.exists(path) or shutil.which(path)):
        if os.environ.get("TASKGEN_REQUIRE_BROWSER"):
            pytest.fail(f"Chromium not found at {path} and TASKGEN_REQUIRE_BROWSER is set")
        pytest.skip(f"Chromium not found at {path}")
    return path


def _task(task_id: str) -> dict:
    return copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == task_id))


@pytest.mark.parametrize("task_id", ["sb-shop-017", "sb-mail-015", "sb-booking-012"])
def test_a_known_solution_passes_its_verifier_in_chromium(chromium, live_server, task_id):
    record = episode_run(task=_task(task_id), agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == "" and record.finished == "done"
    assert record.verifier["ok"], record.verifier
    assert len(record.shots) == len(record.actions) and record.final_shot.startswith(b"\x89PNG")
    assert any(e["method"] == "POST" and e["status"] == 302 for e in record.log)
    assert record.changes and all(c["op"] in ("create", "update", "delete") for c in record.changes)


def test_a_wrong_value_fails_the_verifier_in_chromium(chromium, live_server):
    task = _task("sb-mail-009")
    solution = task["verifier"]["solution"]
    typed = next(a for a in solution if a.get("type", {}).get("target", {}).get("name") == "subject")
    typed["type"]["text"] = "Something else entirely"
    record = episode_run(task=task, agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == ""
    assert record.verifier["ok"] is False
    assert [p["ok"] for p in record.verifier["parts"]] == [False, True]


def test_attempt_writes_a_run_dir_imports_it_and_records_a_crash_as_failed(chromium, live_server, settings, tmp_path,
                                                                           viewer_client):
    settings.SANDBOX_BASE_URL = live_server.url
    crash = {**_task("sb-shop-002"), "task_id": "sb-crash-001", "start_path": f"http://127.0.0.1:{free_port()}/"}
    tasks = [_task("sb-shop-003"), _task("sb-booking-012"), crash]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")

    pipeline_run = run_start(stage="attempt", params={"tasks_file": str(tasks_file), "agent": "scripted",
                                                      "name": "t-run", "mistakes": 0.0})
    run_wait(pipeline_run=pipeline_run, stream=io.StringIO(), work_here=1, stall_seconds=120)  # the engine, here

    pipeline_run.refresh_from_db()
    assert (pipeline_run.status, pipeline_run.done, pipeline_run.failed) == (PipelineRun.Status.DONE, 2, 1)
    assert "ERR_CONNECTION_REFUSED" in pipeline_run.errors[0]
    crashed = pipeline_run.units.get(key="sb-crash-001")
    assert crashed.attempts == 3 and "ERR_CONNECTION_REFUSED" in crashed.last_error  # tried again, then failed
    run_dir = settings.DATA_ROOT / "attempts" / "t-run"
    _assert_run_dir(run_dir)
    run = Run.objects.get(name="t-run")
    _assert_imported(run, pipeline_run)
    page = viewer_client.get(run.episodes.get(task__task_id="sb-booking-012").get_absolute_url()).content.decode()
    assert 'class="pill ok">pass' in page and "/sites/booking/rooms/" in page and "bookings" in page
    assert page.count("<img") >= 5  # the step screenshots and the final one


def _assert_run_dir(run_dir):
    ep = run_dir / "sb-booking-012"
    grade = json.loads((ep / "grade_inputs.json").read_text())
    assert set(grade) == {"actions", "answer", "log", "changes", "seen", "targets", "finished", "end_reason",
                          "end_step", "time", "observations"}
    assert (grade["finished"], grade["end_step"]) == ("done", len(grade["actions"]))
    assert [o["step"] for o in grade["observations"]] == list(range(1, len(grade["actions"]) + 1))
    assert grade["observations"][0]["url"].endswith("/sites/booking/") and grade["observations"][0]["elements"]
    # every action that named an element by its index is recorded with the element's name and box on its screen
    indexed = [n for n, a in enumerate(grade["actions"]) if "index" in (next(iter(a.values())) or {})]
    assert [t["action"] for t in grade["targets"]] == indexed and all(t["name"] for t in grade["targets"])
    assert all(len(t["box"]) == 4 and t["box"][2] > 0 and t["box"][3] > 0 for t in grade["targets"])
    rows = (ep / "rows" / "rows.jsonl").read_text().splitlines()
    assert len(rows) == len(grade["actions"]) and json.loads(rows[0])["image"] == "step_1.png"
    assert (ep / "screenshots" / f"step_{len(rows)}.png").exists() and (ep / "final.png").exists()
    assert (ep / "rows" / "step_1.png").exists() and json.loads((ep / "rows" / "episode.json").read_text())["ok"]
    results = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    assert results == [{"task_id": "sb-booking-012", "ok": True}, {"task_id": "sb-shop-003", "ok": True}]
    assert "error" in json.loads((run_dir / "sb-crash-001" / "grade_inputs.json").read_text())


def _assert_imported(run, pipeline_run):
    assert run.origin == Run.Origin.ATTEMPT and "simulation" in run.agent and pipeline_run.run_id == run.pk
    episodes = {e.task.task_id: e for e in run.episodes.select_related("task", "verifier_result")}
    assert set(episodes) == {"sb-shop-003", "sb-booking-012", "sb-crash-001"}
    crashed = episodes["sb-crash-001"]
    assert crashed.status == Episode.Status.FAILED and "ERR_CONNECTION_REFUSED" in crashed.failure_reason
    booked = episodes["sb-booking-012"]
    assert booked.status == Episode.Status.RECORDED and booked.verifier_result.ok
    assert booked.verifier_result.source == "sandbox" and len(booked.verifier_result.detail["parts"]) == 3
    assert booked.screenshots.filter(kind=Screenshot.Kind.FINAL).count() == 1
    assert booked.data_changes[0]["collection"] == "bookings" and booked.data_changes[0]["op"] == "create"
    # each episode's evidence is its own: no request of the shop episode in the booking one, and the reverse
    assert all(e["path"].startswith("/sites/booking/") for e in booked.request_log)
    assert all(e["path"].startswith("/sites/shop/") for e in episodes["sb-shop-003"].request_log)
    assert episodes["sb-shop-003"].data_changes == []


def _chromium_kill() -> None:
    """SIGKILL this process's Chromium browser process (its renderers die with it): a crash, with Playwright's own
    driver left running as a crash leaves it."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    mine, grew = {os.getpid()}, True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in mine} - mine
        mine, grew = mine | found, bool(found)
    for pid in mine - {os.getpid()}:
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"chrom" in argv[0] and not any(a.startswith(b"--type=") for a in argv):
                os.kill(pid, signal.SIGKILL)


class _BrowserKillingAgent(ScriptedAgent):
    """Follows the solution, but its second action kills the browser, as a Chromium crash would."""

    def act(self, observation):
        if observation.step == 2:
            _chromium_kill()
            time.sleep(0.5)  # gone before the harness acts on it
        return super().act(observation)


def test_a_browser_that_dies_fails_its_episode_and_the_next_episode_gets_a_new_browser(chromium, live_server):
    died = episode_run(task=_task("sb-mail-001"), agent=_BrowserKillingAgent(), base_url=live_server.url)
    assert died.finished == "error" and "closed" in died.error
    assert died.verifier is None and len(died.shots) == 2  # what it recorded before the crash is kept
    after = episode_run(task=_task("sb-mail-001"), agent=ScriptedAgent(), base_url=live_server.url)
    assert after.error == "" and after.verifier["ok"]


def test_goto_scroll_back_and_select_are_run_and_recorded(chromium, live_server):
    solution = [{"goto": {"url": "/sites/booking/bookings/"}}, {"scroll": {"dy": 400}}, {"back": {}},
                {"select": {"target": {"name": "city"}, "value": "Kraków"}},
                {"click": {"target": {"text": "Search rooms"}}}, {"answer": {"text": "listed"}}, {"done": {}}]
    task = {"task_id": "sb-booking-900", "site": "booking", "instruction": "List the rooms in Kraków.",
            "start_path": "/sites/booking/", "task_kind": "action",
            "verifier": {"checks": [{"part": "rooms in Kraków listed", "type": "request_made", "method": "GET",
                                     "path": "/sites/booking/rooms/", "query": {"city": "Kraków"}}],
                         "solution": solution}}
    record = episode_run(task=task, agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == "" and record.verifier["ok"]
    assert [next(iter(a)) for a in record.actions] == ["goto", "scroll", "back", "select", "click", "answer", "done"]
    assert record.actions[0] == {"goto": {"url": "/sites/booking/bookings/"}}
    assert [e["path"] for e in record.log][:2] == ["/sites/booking/", "/sites/booking/bookings/"]
    assert record.answer == "listed" and "Kraków" in record.seen[-1]


def test_a_site_that_answers_500_fails_the_episode_loudly_instead_of_losing_the_write(chromium, live_server,
                                                                                        monkeypatch):
    """A sandbox write that could not be saved ("database is locked" once lost a shop order this way) answers 500:
    the episode must fail with the request named, never be kept as recorded with the write missing."""
    from django.db import OperationalError

    from sandbox.state import SiteState

    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(SiteState, "_record", locked)
    record = episode_run(task=_task("sb-booking-012"), agent=ScriptedAgent(), base_url=live_server.url)
    assert record.finished == "error" and record.verifier is None
    assert "POST /sites/booking/" in record.error and "500" in record.error, record.error


class _Refusals:
    """How many screen captures the harness asked for, under `_refusing`."""

    asked = 0


def _refusing(monkeypatch, refusals: int, message: str = "Unable to capture screenshot") -> _Refusals:
    """Chromium's refusal of a capture, as CI's Chromium answered the first capture after a browser that had just
    started ("Protocol error (Page.captureScreenshot): Unable to capture screenshot"), for the first `refusals`
    captures, and the real capture after them; `message` is what the browser says instead."""
    from playwright.sync_api import Error, Page

    counted, real = _Refusals(), Page.screenshot

    def screenshot(page, *args, **kwargs):
        counted.asked += 1
        if counted.asked <= refusals:
            raise Error(f"Page.screenshot: Protocol error (Page.captureScreenshot): {message}")
        return real(page, *args, **kwargs)

    monkeypatch.setattr(Page, "screenshot", screenshot)
    return counted


def test_a_capture_chromium_refuses_is_asked_again_and_the_episode_is_kept(chromium, live_server, monkeypatch):
    refused = _refusing(monkeypatch, refusals=2)
    record = episode_run(task=_task("sb-mail-001"), agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == "" and record.verifier["ok"], record.error
    assert len(record.shots) == len(record.actions) and all(s.startswith(b"\x89PNG") for s in record.shots)
    assert refused.asked == len(record.shots) + 1 + 2  # each step's, the final screen's, and the two refused


def test_a_browser_that_keeps_refusing_captures_fails_its_episode_with_the_reason(chromium, live_server, monkeypatch):
    refused = _refusing(monkeypatch, refusals=1000)
    record = episode_run(task=_task("sb-mail-001"), agent=ScriptedAgent(), base_url=live_server.url)
    assert record.finished == "error" and record.verifier is None
    assert "refused to capture the page 3 times" in record.error, record.error
    assert refused.asked == 3 and record.shots == []


def test_any_other_capture_error_is_not_asked_again(chromium, live_server, monkeypatch):
    refused = _refusing(monkeypatch, refusals=1, message="Target page, context or browser has been closed")
    record = episode_run(task=_task("sb-mail-001"), agent=ScriptedAgent(), base_url=live_server.url)
    assert record.finished == "error" and "has been closed" in record.error, record.error
    assert refused.asked == 1
