"""What the workbench shows is right, in a real Chromium: each screenshot captioned with the action taken from it (a
scripted episode recorded by the harness), every citation linked (an unsupported one marked), the final label live
after a label, and the run table's filters and sort."""
from __future__ import annotations

import copy
import json
import re

import pytest

from review.services import label_set
from review.workbench_steps import action_line
from sandbox.catalog import sandbox_tasks
from taskgen.harness.agents import ScriptedAgent
from taskgen.harness.browser import browser_close, in_browser_thread
from taskgen.harness.episode import episode_run
from taskgen.harness.rundir import episode_write
from taskgen.models import Episode, Screenshot, VerifierResult
from taskgen.stages.import_.service import import_run_dir
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, TaskFactory, UserFactory
from tests.rundirs import png

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def _close_harness_browser():
    """The harness keeps its own browser between episodes; close it so the live server's threads let go."""
    yield
    in_browser_thread(browser_close)


def _log_in(page, live_server, username: str, role: str = "reviewer") -> None:
    UserFactory(username=username, role=role)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-for-tests")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def _recorded_episode(live_server, tmp_path, task_id: str) -> tuple[Episode, list[dict]]:
    """The scripted agent's episode of a sandbox task, recorded by the harness and imported as a reference run dir."""
    task = copy.deepcopy(next(t for t in sandbox_tasks() if t["task_id"] == task_id))
    record = episode_run(task=task, agent=ScriptedAgent(), base_url=live_server.url)
    assert record.error == "" and record.verifier["ok"]
    run_dir = tmp_path / "run"
    episode_write(record=record, run_dir=run_dir)
    (run_dir / "tasks.jsonl").write_text(json.dumps(task, ensure_ascii=False) + "\n", encoding="utf-8")
    import_run_dir(run_dir=run_dir, tasks_file=run_dir / "tasks.jsonl", name="scripted")
    rows = [json.loads(line) for line in (run_dir / task_id / "rows" / "rows.jsonl").read_text().splitlines()]
    return Episode.objects.get(task__task_id=task_id), rows


def test_each_screenshot_is_captioned_with_the_action_taken_from_it(page, live_server, tmp_path):
    episode, rows = _recorded_episode(live_server, tmp_path, "sb-shop-017")
    actions = episode.actions
    assert [r["action"] for r in rows] == actions and actions[0].get("type") and "done" in actions[-1]
    _log_in(page, live_server, "cap")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    page.wait_for_load_state("networkidle")
    n = len(actions)
    header = page.inner_text("main")
    assert f"· {n} steps ·" in header and f"Steps ({n})" in header and f"Actions ({n})" in header
    frames = page.locator("#filmstrip figure")
    assert frames.count() == n + 1  # a screen per step, then the final state
    for i, row in enumerate(rows, start=1):
        frames.nth(i - 1).click()
        assert page.locator("#step-name").inner_text().startswith(f"{row['image']} ({i}/{n + 1})")
        caption = page.locator("#step-caption").inner_text()
        # the action of row i as recorded, key for key (the page reads rows.jsonl's order, not jsonb's)
        assert actions[i - 1] == row["action"] and caption.startswith(f"step {i}: {action_line(row['action'])}"), (
            i, caption)
        names_an_element = isinstance(next(iter(row["action"].values())), dict) and "index" in next(
            iter(row["action"].values()))
        assert page.locator("#step-target").is_visible() == names_an_element, (i, caption)
        if names_an_element:
            assert re.search(r' → \w+ ".+"$', caption), caption  # the element's name, not its index alone
    frames.nth(n).click()
    assert page.locator("#step-caption").inner_text() == "final state, after the last action"
    page.keyboard.press("Home")  # the arrows still walk the same frames
    frames.nth(0).click()
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-caption").inner_text().startswith(f"step 2: {action_line(rows[1]['action'])}")


CITING = [
    {"part": "search the product", "done": True, "evidence": 'in request #1 it searched for "Brazil Santos Bourbon"'},
    {"part": "add it", "done": True, "evidence": "POST /sites/shop/cart/add/ made change #0 in cart_items, see step 2"},
    {"part": "pay", "done": True, "evidence": "request #12 paid, as the final answer says"},
]


def test_every_citation_links_and_an_unsupported_one_is_marked(page, live_server):
    log = [{"method": "GET", "path": "/sites/shop/", "status": 200},
           {"method": "GET", "path": "/sites/shop/search/", "query": {"q": "Brazil Santos Bourbon"}, "status": 200},
           {"method": "GET", "path": "/static/app.css", "status": 200},
           {"method": "POST", "path": "/sites/shop/cart/add/", "body": {"product_id": "3"}, "status": 302}]
    episode = EpisodeFactory(request_log=log, answer="Paid.",
                             actions=[{"type": {"index": 2, "text": "Brazil Santos Bourbon"}}, {"click": {"index": 5}},
                                      {"done": {}}],
                             data_changes=[{"collection": "cart_items", "op": "create",
                                            "after": {"id": 1, "name": "Brazil Santos Bourbon"}}])
    for step in (1, 2, 3):
        Screenshot.objects.create(episode=episode, step=step, name=f"step_{step}.png",
                                  blob=_blob((step * 60, 20, 20)))
    JudgmentFactory(episode=episode, config=JudgeConfigFactory(provider="gemini", model="gemini-x"), parts=CITING)
    _log_in(page, live_server, "cit", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    page.wait_for_load_state("networkidle")
    links = page.locator("#judgments .cites a.cite")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    # each place once per part: request #1 and the value found in it, change #0 and its collection, are one link each
    assert hrefs == ["#req-1", "#req-3", "#chg-0", "#step-2", "#answer"]
    for i, href in enumerate(hrefs):
        links.nth(i).click()
        assert page.evaluate("location.hash") == href
        assert page.locator(href).count() == 1, href  # the link lands on the evidence it names
    page.locator("#judgments a.cite[href='#step-2']").click()
    assert page.locator("#step-name").inner_text().startswith("step_2.png")  # the viewer shows the cited step
    unsupported = page.locator("#judgments .cite.unsupported")
    assert unsupported.count() == 1 and "request #12: the log has 4" in unsupported.inner_text()
    assert page.locator("#judgments .unsupported-count").inner_text() == "1 unsupported citation"


def _blob(colour):
    from taskgen.blobs import blob_store_image

    return blob_store_image(data=png(colour, size=(320, 200)))


def test_the_final_label_follows_each_label_without_a_reload(page, live_server):
    episode = JudgmentFactory(verdict="SUCCESS").episode
    _log_in(page, live_server, "fin")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    page.wait_for_load_state("networkidle")
    final = page.locator("#final-label .final-state")
    assert final.inner_text() == "No human label yet."
    page.keyboard.press("1")
    page.locator("#final-label .final-state", has_text="from the reviewer's label").wait_for()
    assert final.inner_text().startswith("Success")
    label_set(episode=episode, reviewer=UserFactory(username="other", role="reviewer"), verdict="SUCCESS")
    page.keyboard.press("2")  # now this reviewer says Not success where the other said Success
    page.locator("#final-label .final-state", has_text="The labels disagree").wait_for()
    assert "agreeing labels" not in page.locator("#final-label").inner_text()


def test_the_run_table_filters_and_sorts_from_its_controls(page, live_server):
    run, config = RunFactory(name="triage"), JudgeConfigFactory()
    cases = [("t-1", "SUCCESS", False), ("t-2", "NOT SUCCESS", True), ("t-3", "SUCCESS", True),
             ("t-4", "SUCCESS", False), ("t-5", "NOT SUCCESS", False)]
    for order, (task_id, verdict, ok) in enumerate(cases):
        episode = EpisodeFactory(run=run, task_order=order, task=TaskFactory(task_id=task_id))
        JudgmentFactory(episode=episode, config=config, verdict=verdict)
        VerifierResult.objects.create(episode=episode, ok=ok, source="sandbox")
    _log_in(page, live_server, "tri", role="viewer")
    page.goto(f"{live_server.url}{run.get_absolute_url()}")

    def shown() -> list[str]:
        return page.locator("table.run-table tbody tr td:nth-child(2)").all_inner_texts()

    assert shown() == ["t-1", "t-2", "t-3", "t-4", "t-5"]
    page.check("input[name=verdicts][value=SUCCESS]")
    page.select_option("select[name=verifier]", "fail")
    page.click("#run-filters button[type=submit]")
    page.wait_for_load_state()
    assert shown() == ["t-1", "t-4"] and "verdicts=SUCCESS" in page.url and "verifier=fail" in page.url
    assert page.locator("td.agreement", has_text="false positive (verifier)").count() == 2
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    page.click("th a[data-sort=verdict]")
    page.wait_for_load_state()
    assert shown() == ["t-2", "t-5", "t-1", "t-3", "t-4"] and "sort=verdict" in page.url
    page.click("th a[data-sort=verdict]")  # a second click sorts the other way: the ascending order read backwards
    page.wait_for_load_state()
    assert shown() == ["t-4", "t-3", "t-1", "t-5", "t-2"] and "sort=-verdict" in page.url
    page.click("th a[data-sort=agreement]")
    page.wait_for_load_state()
    assert shown()[:3] == ["t-1", "t-4", "t-2"]  # the judge's mistakes first: false positives, then negatives


def test_filmstrip_thumbnails_keep_their_size_before_they_load(page, live_server):
    """Thumbnails are made on first request: until one arrives its frame already has the screenshot's shape (the
    page names each image's size), so the strip does not collapse to slivers and then jump."""
    episode = EpisodeFactory(actions=[{"click": {"index": 1}}, {"done": {}}], steps=2)
    for step in (1, 2):
        Screenshot.objects.create(episode=episode, step=step, name=f"step_{step}.png", blob=_blob((step * 90, 30, 30)))
    page.route("**/thumb/", lambda route: None)  # thumbnails never answer: the page shows before any arrives
    _log_in(page, live_server, "strip", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}", wait_until="domcontentloaded")
    frames = page.locator("#filmstrip figure img")
    assert frames.count() == 2
    for i in range(2):
        box = frames.nth(i).bounding_box()
        assert abs(box["width"] / box["height"] - 320 / 200) < 0.05, box  # 320x200 screens, not 60-px slivers


def test_a_long_markdown_answer_opens_clamped_and_expands(page, live_server):
    rows = "\n".join(f"| Hotel {i} | {100 + i} € |" for i in range(60))
    answer = f"## Prices found\n\n| Hotel | Price |\n|---|---|\n{rows}\n\n<script>window.hit = 1</script>**done**"
    episode = EpisodeFactory(answer=answer)
    _log_in(page, live_server, "md", role="viewer")
    page.goto(f"{live_server.url}{episode.get_absolute_url()}")
    box, button = page.locator("#answer-text"), page.locator("button[data-expand=answer-text]")
    assert box.locator("table tr").count() == 61 and box.locator("h2").inner_text() == "Prices found"
    assert page.evaluate("() => window.hit === undefined")  # the data's raw HTML stays text
    clamped = box.bounding_box()["height"]
    assert clamped <= 425 and button.is_visible() and button.inner_text() == "Show the whole answer"
    button.click()
    assert box.bounding_box()["height"] > clamped + 200 and button.inner_text() == "Show less"
    button.click()
    assert box.bounding_box()["height"] <= 425
