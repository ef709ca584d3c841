"""Issue 15's Done-when, in a real Chromium on the demo's own data: a researcher opens sandbox-demo, filters to judge
SUCCESS + verifier fail, sees the four false positives with their reasons, opens each, and every caption and
citation on the page is right.

The demo's data is made as `make demo-data` makes it (the same tasks, agent, mistakes and seed, then the rules
judge); only the harness runs in this process (`--inline`) against the test's live server. What the page must show
is read from the run dir the harness wrote (rows.jsonl, grade_inputs.json), not from the database the page reads.
"""
from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from review.workbench_steps import action_line
from taskgen.cli import demo_attempt, demo_judge
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.models import Episode, Run
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NUMBERED = re.compile(r"\b(request|change) #(\d+)")
ANCHOR = {"request": "req", "change": "chg"}


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    yield
    in_browser_thread(browser_close)


@pytest.fixture
def sandbox_demo(live_server, settings, tmp_path) -> Run:
    settings.SANDBOX_BASE_URL, settings.DATA_ROOT = live_server.url, str(tmp_path / "data")
    out, err = io.StringIO(), io.StringIO()
    assert demo_attempt.run({"workers": 0, "inline": True}, out, err) == 0, (out.getvalue(), err.getvalue())
    assert demo_judge.run({"workers": 1}, out, err) == 0, err.getvalue()
    return Run.objects.get(name=demo_attempt.DEMO_RUN)


def _log_in(page, live_server) -> None:
    UserFactory(username="researcher", role="viewer")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "researcher")
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def _recorded(run: Run, task_id: str) -> tuple[list[dict], dict]:
    """What the harness recorded for an episode, from its files: the rows and grade_inputs.json."""
    folder = Path(run.source_dir) / task_id
    rows = [json.loads(line) for line in (folder / "rows" / "rows.jsonl").read_text().splitlines()]
    return rows, json.loads((folder / "grade_inputs.json").read_text())


def _check_captions(page, rows: list[dict]) -> None:
    frames, n = page.locator("#filmstrip figure"), len(rows)
    assert frames.count() == n + 1  # a screen per step, then the final state
    for i, row in enumerate(rows, start=1):
        frames.nth(i - 1).click()
        assert page.locator("#step-name").inner_text().startswith(f"{row['image']} ({i}/{n + 1})")
        caption = page.locator("#step-caption").inner_text()
        assert caption.startswith(f"step {i}: {action_line(row['action'])}"), (row["image"], caption)
    frames.nth(n).click()
    assert page.locator("#step-caption").inner_text() == "final state, after the last action"


def _check_citations(page, recorded: dict) -> int:
    """Every numbered citation in a part's evidence links to the row it names, or is marked unsupported; every
    citation link lands on something. Returns how many citations were checked."""
    counts = {"request": len(recorded.get("log") or []), "change": len(recorded.get("changes") or [])}
    parts, checked = page.locator("#judgments ol.parts:not(.verifier-checks) > li"), 0  # the judge's parts
    for p in range(parts.count()):
        part = parts.nth(p)
        evidence = part.locator(".evidence").inner_text()
        for kind, number in NUMBERED.findall(evidence):
            index, anchor = int(number), f"#{ANCHOR[kind]}-{number}"
            if index < counts[kind]:
                assert part.locator(f"a.cite[href='{anchor}']").count() == 1, (evidence, anchor)
                if kind == "request":  # the row it lands on is the request the harness logged at that index
                    assert recorded["log"][index]["path"] in page.locator(anchor).inner_text()
            else:
                assert part.locator(".cite.unsupported", has_text=f"{kind} #{number}").count() == 1, evidence
            checked += 1
    links = page.locator("#judgments a.cite")
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href")
        assert page.locator(href).count() == 1, href
    return checked


def test_a_researcher_finds_the_demo_s_false_positives_and_every_caption_and_citation_is_right(
        page, live_server, sandbox_demo):
    _log_in(page, live_server)
    page.click(f"a:text-is('{sandbox_demo.name}')")
    page.wait_for_url(f"{live_server.url}{sandbox_demo.get_absolute_url()}*")
    page.check("input[name=verdicts][value=SUCCESS]")
    page.select_option("select[name=verifier]", "fail")
    page.click("#run-filters button[type=submit]")
    page.wait_for_load_state()
    assert "verdicts=SUCCESS" in page.url and "verifier=fail" in page.url

    shown = page.locator("table.run-table tbody tr")
    expected = set(Episode.objects.filter(run=sandbox_demo, judgments__verdict="SUCCESS",
                                          verifier_result__ok=False).values_list("task__task_id", flat=True))
    task_ids = shown.locator("td:nth-child(2)").all_inner_texts()
    assert len(task_ids) == 4 and set(task_ids) == expected
    for row in range(4):
        assert "false positive (verifier)" in shown.nth(row).locator("td.agreement").inner_text()
        assert shown.nth(row).locator("td.flags").inner_text().strip(), task_ids[row]  # its reasons

    checked = 0
    for task_id in task_ids:
        page.goto(f"{live_server.url}{sandbox_demo.get_absolute_url()}?verdicts=SUCCESS&verifier=fail")
        page.click(f"table.run-table a:text-is('{task_id}')")
        page.wait_for_load_state("networkidle")
        rows, recorded = _recorded(sandbox_demo, task_id)
        _check_captions(page, rows)
        checked += _check_citations(page, recorded)
    assert checked >= 4  # the rules judge cites requests and changes by number on each of them
