"""Validate's summary under concurrent writers (PostgreSQL, where it is kept): judge workers, verifier imports and
reviewers write the same episodes in their own transactions while refreshes run; afterwards one refresh brings the
cells to exactly what a live count of the committed rows gives."""
from __future__ import annotations

import random
import threading
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.db.models import Count, F, Sum

from review.services import label_set
from taskgen.models import Episode, Judgment, RunEpisodes, ValidateDirtyEpisode, VerifierResult
from taskgen.stages.validate import service, summary
from tests.factories import EpisodeFactory, JudgeConfigFactory, RunFactory, SiteFactory, TaskFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
VERDICTS = ["SUCCESS", "NOT SUCCESS", "NONE"]


def _writer(seed: int, episodes: list, configs: list, reviewer, barrier: threading.Barrier, errors: list) -> None:
    rng = random.Random(seed)
    runs = list({episode.run for episode in episodes}) + [RunFactory()]
    try:
        barrier.wait(timeout=60)
        for _ in range(40):
            episode = rng.choice(episodes)
            with transaction.atomic():  # one writer's transaction, as a judge unit or an import commits
                what = rng.randrange(5)
                if what == 3:  # an episode imported, into the run or another
                    EpisodeFactory(run=rng.choice(runs), task=TaskFactory(site=episode.site))
                    continue
                if what == 4:  # an episode moved to another run (the admin)
                    Episode.objects.filter(pk=episode.pk).update(run=rng.choice(runs))
                    continue
                if what == 0:
                    Judgment.objects.update_or_create(episode=episode, config=rng.choice(configs), defaults={
                        "verdict": rng.choice(VERDICTS), "cost_usd": Decimal(rng.randrange(100)) / 1000})
                elif what == 1:
                    VerifierResult.objects.update_or_create(episode=episode, defaults={
                        "ok": rng.random() < 0.5, "source": "results.jsonl"})
                else:
                    label_set(episode=episode, reviewer=reviewer, verdict=rng.choice(["SUCCESS", "NOT SUCCESS"]))
    except Exception as exc:  # noqa: BLE001 - reported by the test, with the thread that raised it
        errors.append(exc)
    finally:
        connection.close()


def _refresher(stop: threading.Event, errors: list) -> None:
    try:
        while not stop.is_set():
            summary.validate_summary_refresh()
    except Exception as exc:  # noqa: BLE001
        errors.append(exc)
    finally:
        connection.close()


def _cells(rows: list[dict]) -> dict:
    cells: dict = {}
    for r in rows:
        key = (r["site_id"], r["task_kind"], r["cj__verdict"], r["truth"], r["final"], r.get("oj__verdict"))
        n, cost, other = cells.get(key, (0, Decimal(0), Decimal(0)))
        cells[key] = (n + r["n"], cost + (r["cost"] or 0), other + (r.get("other_cost") or 0))
    return {key: cell for key, cell in cells.items() if cell[0]}


def test_concurrent_writers_and_refreshes_leave_the_summary_equal_to_a_live_count():
    if not summary.summary_available():
        pytest.skip("the summary is kept on PostgreSQL only")
    run, site = RunFactory(), SiteFactory()
    episodes = [EpisodeFactory(run=run, task=TaskFactory(site=site)) for _ in range(6)]  # few: writers collide
    configs = [JudgeConfigFactory(), JudgeConfigFactory(provider="gemini", model="gemini-x")]
    reviewers = [UserFactory(role="reviewer") for _ in range(4)]
    errors: list = []
    barrier, stop = threading.Barrier(4), threading.Event()
    refresher = threading.Thread(target=_refresher, args=(stop, errors))
    writers = [threading.Thread(target=_writer, args=(n, episodes, configs, reviewers[n], barrier, errors))
               for n in range(4)]
    refresher.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=120)
    stop.set()
    refresher.join(timeout=120)
    assert not errors, errors
    summary.validate_summary_refresh()
    assert not ValidateDirtyEpisode.objects.exists()
    for other in (None, configs[1]):
        for against in ("verifier", "human"):
            live = service._live_cells([run.pk], configs[0], against, None, other)
            assert _cells(service._cells([run.pk], configs[0], against, None, other)) == _cells(live), against
    from tests.test_risks_kept import assert_kept_is_live  # the risks kept beside the cells: equal to a live read too
    assert_kept_is_live(run, configs)
    assert_run_episodes_are_counted()


def assert_run_episodes_are_counted() -> None:
    """Each run's episodes as the summary's refresh moved them (the export order's signature) equal a count of the
    committed episodes from scratch."""
    counted = {row["run_id"]: (row["n"], row["total"], row["squares"]) for row in Episode.objects.values("run_id")
               .annotate(n=Count("id"), total=Sum("id"), squares=Sum(F("id") * F("id"))).order_by()}
    kept = {row.run_id: (row.episodes, row.id_sum, row.id_square_sum) for row in RunEpisodes.objects.all()
            if row.episodes}
    assert kept == counted
