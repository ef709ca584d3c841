"""The command line's wait for a run: a progress bar, the reconciler run while waiting, a stall detected (no unit
settled for `stall_seconds`: it names the open units and why), and, at the end, every unit that is not done.

With `work_here` threads the command line works the run's units itself, through the same engine as a worker.
Every command says where a run is worked (`where_words`), how to start a worker for it (`worker_command`) and how
to resume what it did not finish (`resume_words`, said by `wait_report`) in these words, and only here.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from taskgen.db_connections import connections_renew
from taskgen.engine.run_ended import RunEndListener
from taskgen.engine.runs import run_error
from taskgen.engine.send import reconcile_now
from taskgen.engine.stage_table import stage_work
from taskgen.engine.units import Status, unit_counts, units_not_done
from taskgen.engine.worker import backoff_seconds, work
from taskgen.models import PipelineRun

BAR = 30
# While units are in some worker's hands, a wait that cannot hear the run's end (taskgen/engine/run_ended.py: not on
# PostgreSQL) reads the run's status row this often, so a command ends when another process ends the run, not up to
# a whole look later.
TAIL_SECONDS = 0.1  # a primary-key read: 0.3 ms of CPU, 3 ms a second
IDLE_SECONDS = 1.0  # a working thread with no unit due looks again after this long
# A working thread whose slice raised (the database restarted under it, or refused the engine's own bookkeeping)
# tries again on new connections after the engine's backoff (backoff_seconds: 1-2, 2-4, 4-8 s); after this many
# failures with no unit settled meanwhile it stops, and when every thread has stopped the wait ends saying why,
# instead of waiting out the stall with nothing in flight.
WORK_TRIES = 4
log = logging.getLogger(__name__)


@dataclass
class Waited:
    pipeline_run: PipelineRun
    stalled: bool = False
    work_here: int = 0  # the threads this command worked the run with: a resume works it the same way
    stopped_on: str = ""  # the error every thread working here stopped on, when they all did


@dataclass
class HereFailures:
    """The failed tries of the threads working a run here since a unit last settled, the threads that stopped on
    them, and the last error: shared by the threads and the wait (which clears the tries when a unit settles)."""

    threads: int
    tries: dict[str, int] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)
    last_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, name: str, error: str) -> int:
        """Count a failed try of this thread; its failed tries since a unit last settled."""
        with self.lock:
            self.last_error = error
            self.tries[name] = self.tries.get(name, 0) + 1
            if self.tries[name] >= WORK_TRIES:
                self.stopped.add(name)
            return self.tries[name]

    def has_stopped(self, name: str) -> bool:
        return name in self.stopped

    def pause(self, name: str) -> float:
        """Seconds before this worker's next try: the engine's backoff after a failed try (1-2 s, 2-4 s, 4-8 s...)."""
        return backoff_seconds(self.tries.get(name, 1))

    def progressed(self) -> None:
        with self.lock:
            self.tries.clear()

    def all_stopped(self) -> bool:
        return self.threads > 0 and len(self.stopped) >= self.threads


def worker_command(queue: str) -> str:
    """The command that starts a worker taking `queue` (a worker started without -Q takes the default queue only)."""
    return f"celery -A taskgen worker -Q {queue}"


def where_words(*, pipeline_run: PipelineRun, work_here: int) -> str:
    """Where a run's units are worked, as a command says when it starts the run."""
    if work_here:
        return f"here with {work_here} thread{'s' if work_here != 1 else ''}"
    queue = stage_work(pipeline_run.stage).queue
    return f"by the workers of the `{queue}` queue ({worker_command(queue)})"


def resume_words(*, pipeline_run: PipelineRun, work_here: int) -> str:
    """How to run again what a run did not finish, worked where it was: what is done is kept."""
    here = f" --workers {work_here}" if work_here else ""
    return f"resume it to run only what is not done (what is done is kept): taskgen resume {pipeline_run.pk}{here}"


def progress_line(pipeline_run: PipelineRun, counts) -> str:
    """`[#####.....] 12/40 done, 1 failed, 3 running, 24 queued`."""
    total = max(1, pipeline_run.total)
    settled = counts[Status.DONE] + counts[Status.FAILED]
    filled = BAR * settled // total
    return (f"[{'#' * filled}{'.' * (BAR - filled)}] {counts[Status.DONE]}/{pipeline_run.total} done, "
            f"{counts[Status.FAILED]} failed, {counts[Status.RUNNING]} running, {counts[Status.QUEUED]} queued")


def _work_here(pipeline_run_id: int, name: str, stop: threading.Event, ended: threading.Event,
               failures: HereFailures) -> None:
    """A thread working the run's units until the run is no longer running; it wakes the wait (`ended`) then, so
    the command ends with its last unit rather than at the wait's next look. A slice that raised is tried again
    after a pause (`_slice_here`); a thread that stopped on its failures wakes the wait, which ends saying why once
    every thread has stopped."""
    owner = f"command-line:{name}"
    try:
        while not stop.is_set():
            again = _slice_here(pipeline_run_id, owner, failures)
            if again is _FAILED:
                if failures.has_stopped(owner):
                    ended.set()  # the wait looks now
                    return
                stop.wait(failures.pause(owner))
                continue
            if again is None and not PipelineRun.objects.filter(
                    pk=pipeline_run_id, status=PipelineRun.Status.RUNNING).exists():
                ended.set()
                return
            stop.wait(min(IDLE_SECONDS, again if again is not None else IDLE_SECONDS))
    finally:
        connection.close()


_FAILED = object()  # a slice that raised (_slice_here)


def _slice_here(pipeline_run_id: int, owner: str, failures: HereFailures, **options) -> object:
    """`work`'s answer for one slice worked here, or _FAILED when it raised: the failure counted (`failures`), this
    thread's connections renewed. The units a failed slice held go back to the queue when their leases run out
    (the wait reconciles)."""
    try:
        return work(pipeline_run_id=pipeline_run_id, owner=owner, **options)
    except Exception as exc:  # noqa: BLE001  (said on the wait's report when every worker here stopped on it)
        tries = failures.failed(owner, f"{type(exc).__name__}: {str(exc).strip()}")
        log.warning("%s, working run %s, failed (%d of %d tries): %s", owner, pipeline_run_id, tries, WORK_TRIES,
                    exc, exc_info=tries == 1)
        connections_renew()
        return _FAILED


def run_wait(*, pipeline_run: PipelineRun, stream, stall_seconds: float = 600, work_here: int = 0,
             poll_seconds: float = 1.0) -> Waited:
    """Wait until the run ends or stalls, printing its progress when it changes. One worker here works in this
    thread between looks at the progress (it sees this connection's transaction); more work in threads."""
    stop, ended = threading.Event(), threading.Event()
    listener = RunEndListener(pipeline_run.pk, ended)
    count = work_here if work_here > 1 else 0
    failures = HereFailures(threads=count or (1 if work_here == 1 else 0))  # one works here inline
    threads = [threading.Thread(target=_work_here, args=(pipeline_run.pk, str(n), stop, ended, failures),
                                daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    try:
        waited = _watch(pipeline_run, stream, stall_seconds, poll_seconds, inline=work_here == 1, ended=ended,
                        listener=listener, failures=failures)
        waited.work_here = work_here
        return waited
    finally:
        stop.set()
        listener.stop()
        for thread in threads:
            thread.join(timeout=30)


def _watch(pipeline_run: PipelineRun, stream, stall_seconds: float, poll_seconds: float, *,
           inline: bool, ended: threading.Event, listener: RunEndListener, failures: HereFailures) -> Waited:
    # The first reconciler pass comes a period in: a run just started or resumed has nothing for it (run_resume
    # queues a dead worker's lapsed units itself), and at the start it took the GIL from the threads' first calls.
    shown, last_settled, settled_at, reconciled_at = "", -1, time.monotonic(), time.monotonic()
    while True:
        again = _slice_here(pipeline_run.pk, "command-line", failures, slice_seconds=poll_seconds) \
            if inline else None
        if again is _FAILED:
            again = failures.pause("command-line")  # the next try after a pause (at most a look's)
        if time.monotonic() - reconciled_at >= settings.ENGINE_RECONCILE_SECONDS:
            reconcile_now()
            reconciled_at = time.monotonic()
        pipeline_run.refresh_from_db()
        counts = unit_counts(pipeline_run_id=pipeline_run.pk)
        line = progress_line(pipeline_run, counts)
        if line != shown:
            stream.write(line)
            shown = line
        if pipeline_run.is_finished:
            return Waited(pipeline_run)
        if failures.all_stopped():
            return _stopped(pipeline_run, failures)
        settled = counts[Status.DONE] + counts[Status.FAILED]
        if settled != last_settled:
            last_settled, settled_at = settled, time.monotonic()
            failures.progressed()
        elif time.monotonic() - settled_at > stall_seconds:
            return Waited(pipeline_run, stalled=True)
        if counts[Status.RUNNING]:
            listener.start()  # at the first pause it helps (once): from then on the run's end is heard, where it can be
        if (not inline or again) and _pause(pipeline_run, counts, min(poll_seconds, again or poll_seconds), ended,
                                            hearing=listener.hearing):
            ended.clear()  # a thread saw the run end, or its end was heard: one more look, now


def _stopped(pipeline_run: PipelineRun, failures: HereFailures) -> Waited:
    """Every thread working the run here stopped on an error: said on the run's errors too (its page), where the
    database takes it."""
    who = f"the {failures.threads} threads working it here" if failures.threads > 1 else "working it here"
    words = f"{who} stopped after {WORK_TRIES} failed tries with no unit settled meanwhile; the last error: " \
            f"{failures.last_error}"
    with contextlib.suppress(Exception):  # the error may be the database's own
        run_error(pipeline_run_id=pipeline_run.pk, error=words)
    return Waited(pipeline_run, stopped_on=words)


def _pause(pipeline_run: PipelineRun, counts, seconds: float, ended: threading.Event, *, hearing: bool) -> bool:
    """Wait `seconds` for the next look, or until the run ended (True). While units are in a worker's hands (this
    process's threads, or another process's: a second `taskgen resume --workers N` working the same run, the Celery
    workers), only the process that settles the last unit hears it from its threads; the others hear it from
    PostgreSQL (`hearing`: RunEndListener sets `ended`), else read the run's own row every TAIL_SECONDS (a
    primary-key read), or they would wait for their next look, up to `seconds` later."""
    if not counts[Status.RUNNING] or hearing:
        return ended.wait(seconds)
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        if ended.wait(min(TAIL_SECONDS, left)):
            return True
        if not PipelineRun.objects.filter(pk=pipeline_run.pk, status=PipelineRun.Status.RUNNING).exists():
            return True
    return False


def units_not_done_lines(pipeline_run: PipelineRun, limit: int = 200) -> list[str]:
    """One line per unit that is not done: its key, status, tries and last error."""
    units = units_not_done(pipeline_run_id=pipeline_run.pk, limit=limit)
    return [f"  {u.key}: {u.status} after {u.attempts} tries" + (f": {u.last_error}" if u.last_error else "")
            for u in units]


def wait_report(*, waited: Waited, stream, resume_here: int | None = None) -> int:
    """Say how the wait ended; 0 when every unit is done, else 1 with every unit not done named and how to resume
    the run (worked here with `resume_here` threads, by default as this wait was)."""
    pipeline_run = waited.pipeline_run
    lines = units_not_done_lines(pipeline_run)
    if waited.stopped_on:
        stream.write(f"{pipeline_run} stopped: {waited.stopped_on}. Units not done:")
    elif waited.stalled:
        queue = stage_work(pipeline_run.stage).queue
        stream.write(f"{pipeline_run} stalled: no unit finished for a while; it goes on in the background "
                     f"(is a worker running? {worker_command(queue)}). Units not done:")
    elif lines:
        stream.write(f"{pipeline_run} ended with {len(lines)} units not done:")
    for line in lines:
        stream.write(line)
    if not (lines or waited.stalled or waited.stopped_on):
        return 0
    here = waited.work_here if resume_here is None else resume_here
    stream.write(resume_words(pipeline_run=pipeline_run, work_here=here))
    return 1
