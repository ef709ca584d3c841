"""The propose stage offline: site context from the sandbox sitemaps, the rules baseline on the engine, the keep
rules (length, duplicates across batches and against the database, ids, records), tasks.jsonl, resume."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from taskgen.engine.contract import StageParamsError
from taskgen.engine.control import run_start
from taskgen.engine.worker import work
from taskgen.models import PipelineRun, ProposalBatch, Site, Task
from taskgen.stages.propose.context import ContextError, site_context_build, visible_text
from taskgen.stages.propose.keep import answer_items, normalised, proposed_record, sort_items, task_id_for
from tests import propose_helpers

sandbox_maps, sandbox_sites = propose_helpers.sandbox_maps, propose_helpers.sandbox_sites  # fixtures

pytestmark = pytest.mark.django_db


def _propose(**raw) -> PipelineRun:
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", **raw})
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    pipeline_run.refresh_from_db()
    return pipeline_run


def test_context_has_the_pages_controls_and_page_texts(sandbox_sites):
    context = site_context_build(site=sandbox_sites["shop"])
    assert context.home == "/sites/shop/"
    assert "/sites/shop/cart/  Cart — Maison Épicerie" in context.text
    assert "select 'Sort by' [Relevance, Price: low to high" in context.text
    assert "--- /sites/shop/\n" in context.text and "Kenyan AA Whole Beans" in context.text
    assert context.text.index("PAGES") < context.text.index("CONTROLS BY PAGE") < context.text.index("PAGE TEXT")
    assert not context.problems


def test_visible_text_drops_scripts_and_caps():
    html = "<html><script>var x = 1;</script><style>p{}</style><h1>Caf&eacute;  Noir</h1><p>a\n b</p><p>a b</p>"
    assert visible_text(html) == "Café Noir\na b"
    assert len(visible_text("<p>" + "word " * 1000 + "</p>", cap=50)) == 50


def test_a_page_that_fails_to_render_is_named_and_the_site_goes_on(sandbox_sites):
    def read(path):
        if path != "/sites/shop/":
            raise ValueError("HTTP 500")
        return "<h1>Home</h1>"

    context = site_context_build(site=sandbox_sites["shop"], read=read)
    assert "(could not render: ValueError)" in context.text
    assert context.problems and all(p.startswith("site shop, page /sites/shop/") for p in context.problems)


@pytest.mark.parametrize("sitemap", [{}, {"pages": "x"}, {"pages": [{"title": "no path"}]}, "not json {"])
def test_a_sitemap_without_pages_is_a_clear_error(db, sitemap):
    site = Site.objects.create(slug="broken", sitemap=sitemap)
    with pytest.raises(ContextError, match="site broken"):
        site_context_build(site=site)


def test_ids_and_records_follow_the_reference():
    record = proposed_record(site="shop", instruction="Find “Décaf Colombia” and report its price.",
                             start_path="/sites/shop/", task_kind="info")
    assert list(record) == ["kind", "task_id", "site", "sites", "macro", "macros", "instruction", "start_path",
                            "task_kind", "verifier"]
    assert record["task_id"] == "tg-shop-" + __import__("hashlib").md5(
        "Find “Décaf Colombia” and report its price.".encode()).hexdigest()[:8]
    assert task_id_for("mail", "x") == "tg-mail-9dd4e461"
    assert (record["kind"], record["macro"], record["macros"], record["verifier"]) == ("proposed", "proposed", [], None)


def test_keep_rules_length_duplicates_kind_and_room():
    seen = {normalised("Find the cart, please!")}
    items = [{"instruction": "too short"}, {"instruction": "FIND the cart -- please"}, "not an object",
             {"instruction": "Open the orders page and report the newest order", "kind": "info"},
             {"instruction": "open the ORDERS page and report the newest order!"},
             {"instruction": "Book the cheapest room for two nights", "kind": "weird"},
             {"instruction": "Send a message to Amélie about the order"}]
    out = sort_items(items, seen=seen, room=2)
    assert [k["kind"] for k in out.kept] == ["info", "action"]
    assert (out.invalid, out.duplicates, out.over) == (2, 2, 1)


def test_answers_as_an_object_a_bare_list_or_garbage():
    assert answer_items('{"tasks": [{"instruction": "a"}]}') == [{"instruction": "a"}]
    assert answer_items('[{"instruction": "a"}]') == [{"instruction": "a"}]
    assert answer_items('{"other": 1}') == []
    for bad in ("I think so", "", '{"tasks": "many"}'):
        with pytest.raises(ValueError):
            answer_items(bad)


def test_rules_run_keeps_tasks_waiting_for_review_with_batches(sandbox_sites):
    pipeline_run = _propose(sites="shop,mail", per_site=30, batch=10, seed=3)
    assert pipeline_run.status == PipelineRun.Status.DONE
    for slug in ("shop", "mail"):
        tasks = Task.objects.filter(site__slug=slug, proposal_batch__pipeline_run=pipeline_run)
        assert tasks.count() == 30
        assert set(tasks.values_list("review_state", flat=True)) == {Task.ReviewState.PROPOSED}
        assert 0.3 <= tasks.filter(task_kind="info").count() / 30 <= 0.5
        assert len({normalised(t) for t in tasks.values_list("instruction", flat=True)}) == 30
        task = tasks.first()
        assert task.task_id == task_id_for(slug, task.instruction) and task.start_path == f"/sites/{slug}/"
        assert (task.proposed_by_model, task.prompt_version) == ("rules-propose-v1", "propose-v1")
    batch = ProposalBatch.objects.filter(pipeline_run=pipeline_run).first()
    assert batch.context.startswith("PAGES") and batch.prompt and batch.raw_answer and batch.provider == "rules"


def test_rules_proposer_is_deterministic(sandbox_sites):
    first = list(Task.objects.filter(proposal_batch__pipeline_run=_propose(sites="booking", per_site=12, batch=6))
                 .order_by("proposal_batch__index", "pk").values_list("instruction", flat=True))
    Task.objects.all().delete()
    again = list(Task.objects.filter(proposal_batch__pipeline_run=_propose(sites="booking", per_site=12, batch=6))
                 .order_by("proposal_batch__index", "pk").values_list("instruction", flat=True))
    assert first == again and len(first) == 12


def test_tasks_in_the_database_are_not_proposed_again(sandbox_sites):
    first = _propose(sites="shop", per_site=20, batch=10)
    second = _propose(sites="shop", per_site=40, batch=10)
    old = set(Task.objects.filter(proposal_batch__pipeline_run=first).values_list("instruction", flat=True))
    new = set(Task.objects.filter(proposal_batch__pipeline_run=second).values_list("instruction", flat=True))
    assert len(old) == 20 and new and not old & new


def test_unknown_site_is_named_and_the_others_go_on(sandbox_sites):
    pipeline_run = _propose(sites="shop,nowhere", per_site=5, batch=5)
    assert pipeline_run.params["skipped"][0][0] == "nowhere"
    assert Task.objects.filter(site__slug="shop").count() == 5
    with pytest.raises(StageParamsError, match="nowhere"):
        run_start(stage=PipelineRun.Stage.PROPOSE, params={"sites": "nowhere"})


def test_command_writes_tasks_jsonl_and_resume_skips_done_sites(sandbox_sites, settings):
    out = settings.DATA_ROOT / "taskgen" / "tasks.jsonl"
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("taskgen", "propose", "--sites", "shop,mail", "--per-site", "8", "--batch", "4", "--out", str(out),
                 stdout=stdout, stderr=stderr)
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 16 and "shop: 8 tasks" in stdout.getvalue()
    records = [json.loads(line) for line in lines]
    assert [r["site"] for r in records] == ["shop"] * 8 + ["mail"] * 8
    for line, record in zip(lines, records, strict=True):
        assert line == json.dumps(record, ensure_ascii=False) + "\n"
        assert record == proposed_record(site=record["site"], instruction=record["instruction"],
                                         start_path=record["start_path"], task_kind=record["task_kind"])
    assert any("“" in line for line in lines)  # non-ASCII kept as it is
    call_command("taskgen", "propose", "--sites", "shop,mail,booking", "--per-site", "8", "--batch", "4",
                 "--out", str(out), stdout=io.StringIO(), stderr=(again := io.StringIO()))
    assert "skipped site shop: done already" in again.getvalue()
    after = out.read_text(encoding="utf-8").splitlines(keepends=True)
    assert after[:16] == lines and [json.loads(x)["site"] for x in after[16:]] == ["booking"] * 8


def test_approved_tasks_command_writes_only_the_approved(sandbox_sites, settings):
    _propose(sites="shop", per_site=4, batch=4)
    first, second, *_ = Task.objects.filter(site__slug="shop").order_by("created_at", "pk")
    Task.objects.filter(pk__in=[first.pk, second.pk]).update(review_state=Task.ReviewState.APPROVED)
    out = settings.DATA_ROOT / "approved.jsonl"
    call_command("taskgen", "approved-tasks", "--sites", "shop", "--out", str(out), stdout=io.StringIO())
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == [first.task_id, second.task_id]
    with pytest.raises(SystemExit):  # the file exists: never appended to
        call_command("taskgen", "approved-tasks", "--sites", "shop", "--out", str(out), stderr=io.StringIO())


def test_a_prompt_changed_during_a_run_is_named_on_the_run(sandbox_sites, settings, tmp_path):
    """The prompt file edited while a run proposes: the run says so (its tasks came from two prompts)."""
    from taskgen.stages.propose.prompt import DEFAULT_PROMPT_FILE

    prompt = tmp_path / "propose.txt"
    text = DEFAULT_PROMPT_FILE.read_text()
    prompt.write_text(text)
    settings.PROPOSE_PROMPT_FILE = str(prompt)
    pipeline_run = run_start(stage=PipelineRun.Stage.PROPOSE, params={"provider": "rules", "sites": "shop",
                                                                       "per_site": 30, "batch": 10})
    work(pipeline_run_id=pipeline_run.pk, owner="test", slice_seconds=0)  # one batch with the first prompt
    prompt.write_text(text.replace("version: propose-v1", "version: propose-v1-edited"))
    while work(pipeline_run_id=pipeline_run.pk, owner="test") is not None:
        pass
    pipeline_run.refresh_from_db()
    assert pipeline_run.status == PipelineRun.Status.DONE
    assert pipeline_run.result["prompt versions"] == "propose-v1, propose-v1-edited"
    assert any("the propose prompt changed during this run" in error for error in pipeline_run.errors)
    assert set(Task.objects.values_list("prompt_version", flat=True)) == {"propose-v1", "propose-v1-edited"}


def test_a_run_on_one_prompt_names_no_prompt_change(sandbox_sites):
    pipeline_run = _propose(sites="shop", per_site=20, batch=10)
    assert "prompt versions" not in pipeline_run.result and not pipeline_run.errors
