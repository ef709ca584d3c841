"""PostgreSQL ending every connection (a restart, a failover, pg_terminate_backend): what the chaos soak found.

- The psycopg pool handed out its idle connections though the server had ended them, so the next request of every
  web worker answered 500 and the next unit of every worker failed its try: the pool checks a connection before it
  lends it.
- A judge answer that arrived while the worker's connection had been ended was lost when it was to be kept, so the
  retry paid for the call again: the keep is tried once more on a new connection.
"""
from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from taskgen.models import JudgeAnswer, Judgment
from taskgen.stages.judge.service import judge_config_for, judge_episode
from tests.fakes.gemini_server import DEFAULT_ANSWER, FakeGemini
from tests.judge_helpers import shop_episode

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only():
    if connection.vendor != "postgresql":
        pytest.skip("ends PostgreSQL connections")


def _end_every_connection() -> int:
    """pg_terminate_backend on every other session of the test database, from a connection of its own."""
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    with psycopg.connect(**params, autocommit=True) as own:
        return own.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]


def _idle_in_the_pool(count: int) -> None:
    """`count` connections lent at once and given back, as a threaded web worker's pool holds after a busy moment."""
    pool = connection.pool
    lent = [pool.getconn() for _ in range(count)]
    for conn in lent:
        pool.putconn(conn)


def test_a_page_after_postgresql_ended_every_connection_answers(viewer_client):
    assert viewer_client.get("/").status_code == 200
    connection.close()  # what the end of a request does outside tests (the test client keeps it): back to the pool
    _idle_in_the_pool(6)  # each dead one found cost a wait (1, 2, 4, 8 s): five of them outlasted the 10 s timeout
    assert _end_every_connection() >= 1
    assert viewer_client.get("/").status_code == 200


def test_an_answer_that_arrives_after_the_connection_was_ended_is_kept_and_not_paid_again(settings):
    def answer_then_end_connections(body: dict) -> dict:  # the server ends the connections during the call
        _end_every_connection()
        return DEFAULT_ANSWER

    fake = FakeGemini(answer=answer_then_end_connections).start()
    settings.GEMINI_API_KEY, settings.GOOGLE_GEMINI_BASE_URL, settings.REDIS_URL = "test-key", fake.base_url, ""
    try:
        episode = shop_episode()
        config = judge_config_for("gemini")
        for _ in range(2):  # the worker's try, and the engine's retry if that try failed
            try:
                judgment = judge_episode(episode_id=episode.pk, config_id=config.pk)
                break
            except Exception:  # noqa: BLE001, S112  (a failed try: the engine would try again)
                connection.close()
        assert len(fake.requests) == 1  # paid once
        assert Judgment.objects.get(episode=episode).verdict == judgment.verdict == "SUCCESS"
        assert not JudgeAnswer.objects.exists()
    finally:
        fake.stop()


def test_a_database_that_does_not_exist_is_named_not_hidden_behind_the_pools_timeout():
    """A DATABASE_URL naming a database nobody made: the pool's timeout said only 'couldn't get a connection after
    10.00 sec'; the error now carries PostgreSQL's own refusal."""
    from django.db import OperationalError
    from django.db.utils import load_backend

    settings_dict = {**connection.settings_dict, "NAME": "taskgen_no_such_database",
                     "OPTIONS": {**connection.settings_dict["OPTIONS"],
                                 "pool": {**connection.settings_dict["OPTIONS"]["pool"], "timeout": 1.0}}}
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias="no_such_database")
    try:
        with pytest.raises(OperationalError, match='database "taskgen_no_such_database" does not exist'):
            wrapper.ensure_connection()
    finally:
        wrapper.close_pool()
