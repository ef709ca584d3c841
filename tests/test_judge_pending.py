"""Which episodes a judge run still has to judge: the recorded episodes of the run without a verdict under the
config. At a million episodes, a run mostly judged asked PostgreSQL `id NOT IN (the judged ids)`: once those ids no
longer fit in work_mem the subquery is read again for every episode (a SubPlan, not an anti-join), and starting
`taskgen judge` on the run, or a batch's next send, was still running after minutes (cancelled). The pending lists
are asked as NOT EXISTS now."""
from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from taskgen.models import Episode, Judgment, PipelineRun, Task, WorkUnit
from taskgen.stages.judge.batch import _episodes_to_send
from taskgen.stages.judge.service import episodes_to_judge, episodes_without_verdict
from tests.factories import (
    EpisodeFactory,
    JudgeConfigFactory,
    JudgmentFactory,
    RunFactory,
    SiteFactory,
    TaskFactory,
)

pytestmark = pytest.mark.django_db


def test_the_pending_list_is_the_runs_recorded_episodes_without_a_verdict_under_the_config():
    run, config = RunFactory(), JudgeConfigFactory()
    other_config = JudgeConfigFactory(provider="gemini", model="gemini-x")
    unjudged, no_verdict, judged, elsewhere = (EpisodeFactory(run=run, task_order=n) for n in (4, 3, 2, 1))
    EpisodeFactory(run=run, task_order=0, status=Episode.Status.FAILED)  # not recorded: nothing to judge
    JudgmentFactory(episode=no_verdict, config=config, verdict=Judgment.Verdict.NONE)
    JudgmentFactory(episode=judged, config=config, verdict="NOT SUCCESS")
    JudgmentFactory(episode=elsewhere, config=other_config, verdict="SUCCESS")  # judged, but by another config
    EpisodeFactory()  # another run's
    assert episodes_to_judge(run=run, config=config) == [elsewhere.pk, no_verdict.pk, unjudged.pk]  # in task order


def _mostly_judged(episodes: int, judged: int):
    """A run of `episodes` recorded episodes, the first `judged` of them judged under the config."""
    run, config, site = RunFactory(), JudgeConfigFactory(), SiteFactory()
    tasks = Task.objects.bulk_create(
        [TaskFactory.build(site=site, task_id=f"t{n:05d}") for n in range(episodes)])
    rows = Episode.objects.bulk_create(
        [EpisodeFactory.build(run=run, task=task, site=site, task_order=n) for n, task in enumerate(tasks)])
    Judgment.objects.bulk_create([JudgmentFactory.build(episode=e, config=config) for e in rows[:judged]])
    return run, config, rows


def _small_memory(cursor) -> None:
    """This transaction's memory for a hash as small as it goes: 2,900 ids then do not fit, as a million do not fit
    in the default 4 MB (the plan a NOT IN then gets is a SubPlan read again for every episode)."""
    cursor.execute("SET LOCAL work_mem = '64kB'")
    cursor.execute("SET LOCAL hash_mem_multiplier = 1")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan is PostgreSQL's")
def test_the_pending_list_is_an_anti_join_when_the_judged_ids_do_not_fit_in_memory():
    run, config, rows = _mostly_judged(3000, 2900)
    pending = episodes_without_verdict(run.episodes.all(), config)
    with transaction.atomic(), connection.cursor() as cursor:
        _small_memory(cursor)
        plan = pending.explain()
        assert "SubPlan" not in plan, plan[:600]
        assert "Anti Join" in plan, plan[:600]
        assert sorted(pending.values_list("pk", flat=True)) == [e.pk for e in rows[2900:]]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan is PostgreSQL's")
def test_a_batchs_next_send_asks_no_subquery_per_episode():
    run, config, rows = _mostly_judged(3000, 2900)
    pipeline_run = PipelineRun.objects.create(stage="judge", params={"run": run.pk, "config_id": config.pk})
    WorkUnit.objects.bulk_create([WorkUnit(pipeline_run=pipeline_run, key=str(e.pk)) for e in rows])
    with transaction.atomic(), connection.cursor() as cursor:
        _small_memory(cursor)
        with CaptureQueriesContext(connection) as seen:
            assert _episodes_to_send(pipeline_run, config) == [e.pk for e in rows[2900:]]
        cursor.execute(f"EXPLAIN {seen.captured_queries[-1]['sql']}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "SubPlan" not in plan, plan[:600]
