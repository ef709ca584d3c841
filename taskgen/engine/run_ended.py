"""Hearing at once that a run ended in another process (a second `taskgen resume --workers N` settling the last unit,
a Celery worker, a cancel from the runs page), instead of reading the run's row every TAIL_SECONDS.

On PostgreSQL a trigger on the runs table (migration 0027) sends NOTIFY on RUN_ENDED_CHANNEL, with the run's id, when
a run leaves `running`, whatever ended it. A waiting command LISTENs on a connection of its own (outside Django's
pool: a pooled connection would go back still listening), on a thread that sets the wait's event when its run's
id comes. Elsewhere (SQLite) nothing is heard and the wait reads the row as before.
"""
from __future__ import annotations

import logging
import os
import select
import threading

from django.db import connection

log = logging.getLogger(__name__)

RUN_ENDED_CHANNEL = "taskgen_run_ended"  # the trigger's channel (taskgen/migrations/0027_run_ended_notify.py)


class RunEndListener:
    """Sets `ended` when the run's end is heard. `start()` tries once (later calls say what the first found) and
    says whether the end can be heard here, as `hearing` does after it (PostgreSQL, the listening connection opened).
    `stop()` ends the thread at once (a pipe wakes it), and closes the connection."""

    def __init__(self, pipeline_run_id: int, ended: threading.Event) -> None:
        self.payload, self.ended = str(pipeline_run_id).encode(), ended
        self.hearing = False
        self._tried = False
        self._listening = None
        self._wake = (-1, -1)
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        if not self._tried:
            self._tried = True
            self.hearing = connection.vendor == "postgresql" and self._listen()
        return self.hearing

    def _listen(self) -> bool:
        import psycopg

        try:
            listening = psycopg.connect(**connection.get_connection_params(), autocommit=True)
            listening.execute(f"LISTEN {RUN_ENDED_CHANNEL}")
        except psycopg.Error as exc:  # the wait reads the run's row instead, as on SQLite
            log.warning("cannot listen for runs' ends (%s): the wait reads the run's row instead", exc)
            return False
        self._listening, self._wake = listening, os.pipe()
        self._thread = threading.Thread(target=self._hear, name="run-end-listener", daemon=True)
        self._thread.start()
        self.ended.set()  # one look now: the run may have ended before the LISTEN
        return True

    def _hear(self) -> None:
        pgconn = self._listening.pgconn
        try:
            while True:
                ready, _, _ = select.select([pgconn.socket, self._wake[0]], [], [])
                if self._wake[0] in ready:
                    return
                pgconn.consume_input()
                while (note := pgconn.notifies()) is not None:
                    if note.extra == self.payload:
                        self.ended.set()
        except Exception:  # a lost connection: the wait's own looks still see the end, a look later
            log.warning("the run-end listener stopped", exc_info=True)

    def stop(self) -> None:
        if self._thread is None:
            return
        os.write(self._wake[1], b"x")
        self._thread.join(timeout=5)
        self._listening.close()
        for end in self._wake:
            os.close(end)
        self._thread = None
