"""Validate's figures, summed from grouped cells, equal a recomputation from scratch episode by episode after random
writes: judgments made, changed and deleted, verifier results written and removed, labels, relabels and
adjudications (through review/services.py's locked path)."""
from __future__ import annotations

import random
from collections import defaultdict
from decimal import Decimal

import pytest

from review.services import label_set
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import Episode, FinalLabel, Judgment, Label, VerifierResult
from taskgen.stages.validate.humans import judge_reviewer_agreement
from taskgen.stages.validate.service import judges_agreement, validate_compare, validate_compute
from taskgen.stats import Confusion, cohen_kappa, confusion_summary
from tests.factories import EpisodeFactory, JudgeConfigFactory, RunFactory, SiteFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db
VERDICTS = ["SUCCESS", "NOT SUCCESS", "NONE"]
LABELS = ["SUCCESS", "NOT SUCCESS", "UNSURE"]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world():
    run, other_run = RunFactory(), RunFactory()
    sites = [SiteFactory(slug=f"site-{n}") for n in range(3)]
    episodes = [EpisodeFactory(run=run if n % 5 else other_run, task=TaskFactory(
        site=sites[n % 3], task_kind="action" if n % 2 else "info")) for n in range(40)]
    configs = [JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")]
    reviewers = [UserFactory(role="reviewer") for _ in range(3)]
    adjudicator = UserFactory(role="adjudicator")
    return {"run": run, "other_run": other_run, "sites": sites, "episodes": episodes, "configs": configs,
            "reviewers": reviewers, "adjudicator": adjudicator}


def _write(world: dict, rng: random.Random) -> None:
    """One random write of the kinds validate reads."""
    episode, config = rng.choice(world["episodes"]), rng.choice(world["configs"])
    what = rng.randrange(10)
    if what <= 1:
        Judgment.objects.update_or_create(episode=episode, config=config, defaults={
            "verdict": rng.choice(VERDICTS), "cost_usd": Decimal(rng.randrange(100)) / 1000})
    elif what == 2:
        Judgment.objects.filter(episode=episode, config=config).delete()
    elif what == 3:
        VerifierResult.objects.update_or_create(episode=episode, defaults={"ok": rng.random() < 0.5,
                                                                           "source": "results.jsonl"})
    elif what == 4 and rng.random() < 0.3:
        VerifierResult.objects.filter(episode=episode).delete()
    elif what == 5:
        label_set(episode=episode, reviewer=rng.choice(world["reviewers"]), verdict=rng.choice(LABELS))
    elif what == 6 and rng.random() < 0.3:
        final_label_adjudicate(episode=episode, adjudicator=world["adjudicator"], verdict=rng.choice(LABELS),
                               reason="settled")
    elif what >= 7:
        _write_in_bulk(world, rng, what)


def _write_in_bulk(world: dict, rng: random.Random, what: int) -> None:
    """Writes of many rows in one statement, and episodes moved, added and removed."""
    episodes = rng.sample(world["episodes"], 5)
    if what == 7:  # one statement changes several judgments' verdicts
        Judgment.objects.filter(episode__in=episodes, config=rng.choice(world["configs"])).update(
            verdict=rng.choice(VERDICTS))
    elif what == 8:  # an episode moves to another site, task kind or run
        Episode.objects.filter(pk=episodes[0].pk).update(**rng.choice([
            {"site": rng.choice(world["sites"])}, {"task_kind": rng.choice(["action", "info"])},
            {"run": rng.choice([world["run"], world["other_run"]])}]))
    elif rng.random() < 0.5:  # a new episode, judged at once
        added = EpisodeFactory(run=world["run"], task=TaskFactory(site=rng.choice(world["sites"])))
        Judgment.objects.create(episode=added, config=rng.choice(world["configs"]), verdict=rng.choice(VERDICTS))
        world["episodes"].append(added)
    elif unlabelled := [e for e in episodes if not Label.objects.filter(episode=e).exists()
                        and not FinalLabel.objects.filter(episode=e).exists()]:  # labels protect an episode
        world["episodes"].remove(unlabelled[0])
        unlabelled[0].delete()


def _truths(world: dict, against: str, reviewer) -> dict:
    """Each episode's truth (True, False or None), read row by row."""
    if against == "verifier":
        return {v.episode_id: v.ok for v in VerifierResult.objects.all()}
    rows = FinalLabel.objects.all() if against == "human" else Label.objects.filter(reviewer=reviewer)
    return {row.episode_id: {"SUCCESS": True, "NOT SUCCESS": False}.get(row.verdict) for row in rows}


def _expected(world: dict, config, against: str, reviewer=None, other=None) -> dict:
    """The report's figures recomputed from scratch, one episode at a time."""
    run_episodes = list(Episode.objects.filter(run=world["run"]).select_related("site"))
    verdicts = {j.episode_id: j for j in Judgment.objects.filter(config=config)}
    others = {j.episode_id: j.verdict for j in Judgment.objects.filter(config=other)} if other else None
    truths, finals = _truths(world, against, reviewer), dict(FinalLabel.objects.values_list("episode_id", "verdict"))
    overall, sites, kinds, totals = Confusion(), defaultdict(Confusion), defaultdict(Confusion), defaultdict(int)
    cost, fps = Decimal(0), []
    for episode in sorted(run_episodes, key=lambda e: (e.task_order, e.pk)):
        if others is not None and others.get(episode.pk) not in ("SUCCESS", "NOT SUCCESS"):
            continue
        judgment, truth = verdicts.get(episode.pk), truths.get(episode.pk)
        verdict = judgment.verdict if judgment else None
        yes, no = verdict == "SUCCESS", verdict == "NOT SUCCESS"
        cell = Confusion(int(truth is True and yes), int(truth is False and yes), int(truth is True and no),
                         int(truth is False and no))
        overall, sites[episode.site.slug], kinds[episode.task_kind] = (
            overall + cell, sites[episode.site.slug] + cell, kinds[episode.task_kind] + cell)
        final = finals.get(episode.pk)
        for key, counts in (("total", True), ("with_truth", truth is not None), ("judged", yes or no),
                            ("no_verdict", truth is not None and verdict == "NONE"), ("judgments", judgment),
                            ("n_s", yes), ("l_s", yes and final in ("SUCCESS", "NOT SUCCESS")),
                            ("t_s", yes and final == "SUCCESS"), ("n_f", no),
                            ("l_f", no and final in ("SUCCESS", "NOT SUCCESS")), ("t_f", no and final == "SUCCESS")):
            totals[key] += bool(counts)
        cost += judgment.cost_usd if judgment else 0
        if truth is False and yes:
            fps.append(episode.pk)
    return {
        "figures": confusion_summary(overall), "episodes_in_runs": totals["total"],
        "per_site": [{"name": k, **confusion_summary(c)} for k, c in sorted(sites.items()) if c.n],
        "per_kind": [{"name": k, **confusion_summary(c)} for k, c in sorted(kinds.items()) if c.n],
        "with_truth": totals["with_truth"], "unjudged": totals["with_truth"] - overall.n,
        "unjudged_no_verdict": totals["no_verdict"], "judged_without_truth": totals["judged"] - overall.n,
        "judgments": totals["judgments"], "cost_usd": float(cost), "false_positives": fps,
    }


def _actual(report) -> dict:
    found = {key: getattr(report, key) for key in ("figures", "episodes_in_runs", "per_site", "per_kind",
                                                   "with_truth", "unjudged", "unjudged_no_verdict",
                                                   "judged_without_truth", "judgments", "cost_usd")}
    return {**found, "false_positives": [row["episode_id"] for row in report.false_positives]}


def _expected_agreement(world: dict) -> dict:
    a, b = (dict(Judgment.objects.filter(config=c).values_list("episode_id", "verdict")) for c in world["configs"])
    c = Confusion()
    for episode in Episode.objects.filter(run=world["run"]):
        va, vb = a.get(episode.pk), b.get(episode.pk)
        if {va, vb} <= {"SUCCESS", "NOT SUCCESS"}:
            c += Confusion(int(va == vb == "SUCCESS"), int(va == "NOT SUCCESS" and vb == "SUCCESS"),
                           int(va == "SUCCESS" and vb == "NOT SUCCESS"), int(va == vb == "NOT SUCCESS"))
    return {"episodes": c.n, "both_success": c.tp, "only_a": c.fn, "only_b": c.fp, "both_not": c.tn,
            "agreement": round((c.tp + c.tn) / max(1, c.n), 3), "kappa": cohen_kappa(c)}


def _check(world: dict) -> None:
    runs, (first, second) = [world["run"]], world["configs"]
    for against, reviewer in (("verifier", None), ("human", None), ("reviewer", world["reviewers"][0])):
        report = validate_compute(runs=runs, config=first, against=against, reviewer=reviewer, list_limit=None)
        assert _actual(report) == _expected(world, first, against, reviewer), against
        both = validate_compare(runs=runs, config_a=first, config_b=second, against=against, reviewer=reviewer,
                                list_limit=None)
        assert _actual(both["a"]) == _expected(world, first, against, reviewer, other=second), against
        assert _actual(both["b"]) == _expected(world, second, against, reviewer, other=first), against
        assert _actual(both["alone"]) == _actual(report), against
    agreement = _expected_agreement(world)
    assert judges_agreement(runs=runs, config_a=first, config_b=second) == agreement
    assert both["agreement"] == agreement
    assert judge_reviewer_agreement(runs=runs, config=first) == _expected_judge_vs_reviewers(world, first)


def _expected_judge_vs_reviewers(world: dict, config) -> list[dict]:
    verdicts = dict(Judgment.objects.filter(config=config).values_list("episode_id", "verdict"))
    cells = defaultdict(Confusion)
    for label in Label.objects.filter(episode__run=world["run"]).select_related("reviewer"):
        human, judge = label.verdict, verdicts.get(label.episode_id)
        if human in ("SUCCESS", "NOT SUCCESS") and judge in ("SUCCESS", "NOT SUCCESS"):
            h, j = human == "SUCCESS", judge == "SUCCESS"
            cells[label.reviewer.username] += Confusion(int(h and j), int(j and not h), int(h and not j),
                                                        int(not h and not j))
    return [{"reviewer": name, "episodes": c.n, "agree": c.tp + c.tn, "agreement": round((c.tp + c.tn) / c.n, 3),
             "kappa": cohen_kappa(c), "cells": [c.tp, c.fp, c.fn, c.tn]} for name, c in sorted(cells.items())]


@pytest.mark.parametrize("seed", [1, 2])
def test_figures_equal_a_recomputation_after_random_writes(world, seed):
    rng = random.Random(seed)
    for _ in range(6):
        for _ in range(25):
            _write(world, rng)
        _check(world)


def _counted(rows: list[dict]) -> dict:
    """Cells summed per (site, kind, verdict, truth, final, other verdict): [n, cost, other cost]."""
    cells: dict = defaultdict(lambda: [0, Decimal(0), Decimal(0)])
    for r in rows:
        cell = cells[(r["site_id"], r["task_kind"], r["cj__verdict"], r["truth"], r["final"], r.get("oj__verdict"))]
        cell[0] += r["n"]
        cell[1] += r["cost"] or 0
        cell[2] += r.get("other_cost") or 0
    return {key: cell for key, cell in cells.items() if cell[0]}


@pytest.mark.parametrize("seed", [3, 4])
def test_the_summary_counts_what_the_live_query_counts_for_every_pair_of_configs(world, seed):
    """On PostgreSQL, where the summary is kept: its cells equal the live grouped scan's, one config or two, in
    either order, against verifiers and final labels, after every kind of write."""
    from taskgen.stages.validate import service
    from taskgen.stages.validate.summary import summary_available

    if not summary_available():
        pytest.skip("the summary is kept on PostgreSQL only")
    world["configs"].append(JudgeConfigFactory(provider="gemini", model="gemini-y"))
    rng, run_ids = random.Random(seed), [world["run"].pk, world["other_run"].pk]
    for _ in range(4):
        for _ in range(40):
            _write(world, rng)
        for config in world["configs"]:
            for other in [None, *(c for c in world["configs"] if c != config)]:
                for against in ("verifier", "human"):
                    live = service._live_cells(run_ids, config, against, None, other)
                    kept = service._cells(run_ids, config, against, None, other)
                    assert _counted(kept) == _counted(live), (config, other, against)


def test_the_periodic_refresh_re_sums_every_marked_episode_a_chunk_at_a_time(world, monkeypatch):
    """Beat's refresh consumes every mark written before it, in several short transactions, and leaves cells equal
    to the live scan's; where no summary is kept it does nothing."""
    from taskgen.models import ValidateDirtyEpisode
    from taskgen.stages.validate import service, summary
    from taskgen.stages.validate.tasks import validate_summary_refresh_task

    rng = random.Random(5)
    for _ in range(60):
        _write(world, rng)
    if not summary.summary_available():
        assert validate_summary_refresh_task() is False
        return
    monkeypatch.setattr(summary, "CHUNK", 7)
    assert ValidateDirtyEpisode.objects.count() > 3 * summary.CHUNK
    assert validate_summary_refresh_task() is True
    assert not ValidateDirtyEpisode.objects.exists()
    config, other = world["configs"]
    for against in ("verifier", "human"):
        live = service._live_cells([world["run"].pk], config, against, None, other)
        assert _counted(service._cells([world["run"].pk], config, against, None, other)) == _counted(live)
