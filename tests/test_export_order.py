"""The export's kept order and its chunked reads (taskgen/stages/export/order.py) pick exactly what the reference's
rules pick over every episode: on random runs (sites, task orders, verdicts, labels, verifier failures, risks, rows
and budgets), read a few episodes at a time and stopping at the budget, and again after episodes are added."""
from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from taskgen.models import Episode, ExportOrder, FinalLabel, Judgment, VerifierResult
from taskgen.stages.export import order as export_order_module
from taskgen.stages.export.order import SelectContext, episodes_in_order, export_order
from taskgen.stages.export.select import export_select
from taskgen.stages.validate.summary import summary_available, validate_summary_refresh
from tests.factories import EpisodeFactory, JudgeConfigFactory, JudgmentFactory, RunFactory, SiteFactory, TaskFactory

pytestmark = pytest.mark.django_db


def _add_episodes(run, config, rng: random.Random, count: int) -> None:
    sites = [SiteFactory(slug=slug) for slug in ("beta", "alpha", "gamma", "delta")]
    for _ in range(count):
        site = rng.choice(sites)
        rows = rng.choice([0, 1, 2, 3, 5])
        episode = EpisodeFactory(run=run, task=TaskFactory(site=site), task_order=rng.randrange(60),
                                 has_rows=rng.random() < 0.9, row_count=rows)
        JudgmentFactory(episode=episode, config=config, inconsistent=rng.random() < 0.2,
                        verdict=Judgment.Verdict.SUCCESS if rng.random() < 0.7 else Judgment.Verdict.NOT_SUCCESS)
        if rng.random() < 0.2:
            FinalLabel.objects.create(episode=episode, verdict=rng.choice(["SUCCESS", "NOT SUCCESS", "UNSURE"]),
                                      adjudicated=rng.random() < 0.3)
        if rng.random() < 0.2:
            VerifierResult.objects.create(episode=episode, ok=rng.random() < 0.5, source="sandbox")


def _oracle(run, config, *, budget: int, exclude_inconsistent: bool, labels_ignored: bool,
            source: str = "judge") -> list[int]:
    """The rules written out over every episode: sites by name, round robin, each site's episodes by (task order,
    id); what the source approves (the judge's successes, the final labels' successes, or a final label over the
    judge), less a Not success label (and for a label over the judge an Unsure one), a failed verifier and (if cut) an
    inconsistent verdict; whole episodes with rows until the steps reach the budget."""
    episodes = list(Episode.objects.filter(run=run).select_related("site"))
    by_site: dict[str, list[Episode]] = {}
    for episode in sorted(episodes, key=lambda e: (e.task_order, e.pk)):
        by_site.setdefault(episode.site.slug, []).append(episode)
    order = [e for _, _, e in sorted((i, slug, e) for slug, site in by_site.items() for i, e in enumerate(site))]
    judgments = {j.episode_id: j for j in Judgment.objects.filter(config=config, episode__run=run)}
    finals = {} if labels_ignored else {f.episode_id: f.verdict for f in FinalLabel.objects.filter(episode__run=run)}
    verifier = dict(VerifierResult.objects.filter(episode__run=run).values_list("episode_id", "ok"))
    picked, steps = [], 0
    for episode in order:
        judgment, final = judgments[episode.pk], finals.get(episode.pk)
        judge_yes, human_yes = judgment.verdict == Judgment.Verdict.SUCCESS, final == "SUCCESS"
        approved = {"judge": judge_yes, "human": human_yes, "human-over-judge": judge_yes or human_yes}[source]
        if not approved or final == "NOT SUCCESS" or (source == "human-over-judge" and final == "UNSURE"):
            continue
        if verifier.get(episode.pk) is False or (exclude_inconsistent and judgment.inconsistent):
            continue
        if episode.has_rows and episode.row_count and steps < budget:
            picked.append(episode.pk)
            steps += episode.row_count
    return picked


@pytest.mark.parametrize("seed", [1, 2])
def test_the_kept_order_read_in_chunks_picks_exactly_what_the_rules_pick(monkeypatch, seed):
    monkeypatch.setattr(export_order_module, "FIRST_CHUNK", 7)  # many chunks, each read once
    monkeypatch.setattr(export_order_module, "LAST_CHUNK", 20)
    monkeypatch.setattr(export_order_module, "MIN_CHUNK", 2)  # chunks cut to what a selection expects to need
    rng = random.Random(seed)
    run, config = RunFactory(), JudgeConfigFactory()
    _add_episodes(run, config, rng, 90)
    for _ in range(2):
        for budget in (1, 17, 60, 10_000):
            for cut, ignored in ((False, False), (True, False), (False, True)):
                context = SelectContext()
                kwargs = {"run": run, "judge_config": config, "budget": budget, "labels_ignored": ignored,
                          "exclude_risk": ("inconsistent",) if cut else ()}
                fast = export_select(**kwargs, stop_at_budget=True, context=context)
                whole = export_select(**kwargs)
                expected = _oracle(run, config, budget=budget, exclude_inconsistent=cut, labels_ignored=ignored)
                assert [c.episode_id for c in fast.picked] == [c.episode_id for c in whole.picked] == expected
                assert _chunks_read(context) == _chunks_needed(run, config, fast, context), "a chunk past the budget"
        _add_episodes(run, config, rng, 25)  # the kept order is stale now: its signature says so


def _chunks_read(context: SelectContext) -> int:
    return sum(1 for key in context.reads if key[0] == "chunk")


def _chunks_needed(run, config, selection, context: SelectContext) -> int:
    """The chunks up to the one holding the episode that reached the budget (every chunk when none did), by the
    chunks' edges the selection made (each cut to what it expected to need)."""
    order = list(export_order(run)[0])
    last = order.index(selection.picked[-1].episode_id) if selection.rows >= selection.budget else len(order) - 1
    ends = context.reads[("chunk ends", run.pk, config.pk)]
    return next(index for index, end in enumerate(ends) if end > last) + 1


@pytest.mark.parametrize("source", ["human", "human-over-judge"])
def test_each_source_reads_in_chunks_what_the_rules_pick(monkeypatch, source):
    """A chunk keeps only the episodes some source can approve (the judge's successes and the final labels'
    successes): a final label's success the judge failed is still picked by the sources that read labels."""
    monkeypatch.setattr(export_order_module, "FIRST_CHUNK", 7)
    monkeypatch.setattr(export_order_module, "LAST_CHUNK", 20)
    rng = random.Random(3)
    run, config = RunFactory(), JudgeConfigFactory()
    _add_episodes(run, config, rng, 120)
    overturned = Judgment.objects.filter(config=config, verdict=Judgment.Verdict.NOT_SUCCESS, episode__has_rows=True,
                                         episode__row_count__gt=0).values_list("episode_id", flat=True)[:5]
    for pk in overturned:
        FinalLabel.objects.update_or_create(episode_id=pk, defaults={"verdict": "SUCCESS", "adjudicated": False})
    VerifierResult.objects.filter(episode_id__in=overturned).delete()
    for budget in (5, 40, 10_000):
        for cut in (False, True):
            kwargs = {"run": run, "judge_config": config, "budget": budget, "source": source,
                      "exclude_risk": ("inconsistent",) if cut else ()}
            fast = export_select(**kwargs, stop_at_budget=True, context=SelectContext())
            expected = _oracle(run, config, budget=budget, exclude_inconsistent=cut, labels_ignored=False,
                               source=source)
            assert [c.episode_id for c in fast.picked] == expected
    whole = export_select(run=run, judge_config=config, budget=10_000, source=source)
    assert set(overturned) <= {c.episode_id for c in whole.picked}


def test_the_order_is_kept_and_computed_again_only_when_the_run_changes():
    run, config = RunFactory(), JudgeConfigFactory()
    _add_episodes(run, config, random.Random(5), 12)
    ids, order_from = export_order(run)
    assert list(ids) == episodes_in_order(run)[0] and order_from == "episodes" and ExportOrder.objects.count() == 1
    kept = ExportOrder.objects.get(run=run)
    assert list(export_order(run)[0]) == list(ids) and ExportOrder.objects.get(run=run).updated_at == kept.updated_at
    Episode.objects.filter(pk=ids[-1]).delete()
    assert list(export_order(run)[0]) == list(ids[:-1])


def test_the_kept_order_is_checked_against_the_summarys_sums_and_follows_every_change_of_the_run():
    """Where validate's summary is kept and current, the order's signature is the run's one row of sums (not a count
    over the run's ids: 0.05-0.3 s at a million); an episode swapped for another (the count unchanged), added or
    deleted computes the order again, whether the summary has caught up with the write or not."""
    run, config = RunFactory(), JudgeConfigFactory()
    _add_episodes(run, config, random.Random(7), 12)
    summary_refresh = validate_summary_refresh if summary_available() else (lambda: None)
    for step in ("kept", "swap", "add", "delete"):
        if step == "swap":
            Episode.objects.filter(pk=max(Episode.objects.filter(run=run).values_list("pk", flat=True))).delete()
            _add_episodes(run, config, random.Random(8), 1)
        elif step == "add":
            _add_episodes(run, config, random.Random(9), 1)
        elif step == "delete":
            Episode.objects.filter(pk=min(Episode.objects.filter(run=run).values_list("pk", flat=True))).delete()
        for call in ("before the summary's refresh", "after it", "once more"):
            if call == "after it":
                summary_refresh()
            with CaptureQueriesContext(connection) as seen:
                ids, _ = export_order(run)
            assert list(ids) == episodes_in_order(run)[0], (step, call)
            if call == "once more" and summary_available():  # the sums, kept with the order at the last call
                assert not any("COUNT(" in q["sql"] for q in seen.captured_queries), step


def test_a_process_reads_a_kept_order_once_while_its_signature_holds(monkeypatch):
    """A certify call read the whole kept order (8 MB at a million episodes, 20-30 ms) each time: a process keeps
    the last one it read, by the signature it has (one signature, one order); a change of the run's episodes is a
    new signature, so the order is computed again and never served stale."""
    run, config = RunFactory(), JudgeConfigFactory()
    _add_episodes(run, config, random.Random(11), 10)
    reads, kept_ids = [], export_order_module._kept_ids
    monkeypatch.setattr(export_order_module, "_kept_ids", lambda *a: reads.append(1) or kept_ids(*a))
    monkeypatch.setattr(export_order_module, "_RECENT", {})
    summary_refresh = validate_summary_refresh if summary_available() else (lambda: None)
    first = list(export_order(run)[0])  # computed and kept: nothing read back
    for _ in range(3):
        summary_refresh()
        assert list(export_order(run)[0]) == first
    assert len(reads) <= 1  # at most once, when the signature took the summary's sums
    export_order_module._RECENT.clear()  # another process: reads the kept row once
    reads.clear()
    assert list(export_order(run)[0]) == first == list(export_order(run)[0]) and len(reads) == 1
    Episode.objects.filter(pk=first[0]).delete()
    summary_refresh()
    again = list(export_order(run)[0])
    assert again == episodes_in_order(run)[0] and sorted(again) == sorted(first[1:])


def test_the_kept_order_is_stored_uncompressed_on_postgresql():
    """A certificate reads a run's whole kept order (8 MB at a million episodes) on every call: uncompressed, the
    server hands it over without inflating it first (migration 0024)."""
    if connection.vendor != "postgresql":
        pytest.skip("storage is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = 'taskgen_exportorder'::regclass "
                       "AND attname = 'episode_ids'")
        assert cursor.fetchone()[0] == "e"
