"""The command line's wait for a run: a progress bar, the reconciler run while waiting, a stall detected (no unit
settled for `stall_seconds`: it names the open units and why), and, at the end, every unit that is not done.

With `work_here` threads the command line works the run's units itself, through the same engine as a worker.
Every command says where a run is worked (`where_words`), how to start a worker for it (`worker_command`) and how
to resume what it did not finish (`resume_words`, said by `wait_report`) in these words, and only here.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from taskgen.engine.run_ended import RunEndListener
from taskgen.engine.send import reconcile_now
from taskgen.engine.stage_table import stage_work
from taskgen.engine.units import Status, unit_counts, units_not_done
from taskgen.engine.worker import work
from taskgen.models import PipelineRun

BAR = 30
# While units are in some worker's hands, a wait that cannot hear the run's end (taskgen/engine/run_ended.py: not on
# PostgreSQL) reads the run's status row this often, so a command ends when another process ends the run, not up to
# a whole look later.
TAIL_SECONDS = 0.1  # a primary-key read: 0.3 ms of CPU, 3 ms a second
IDLE_SECONDS = 1.0  # a working thread with no unit due looks again after this long


@dataclass
class Waited:
    pipeline_run: PipelineRun
    stalled: bool = False
    work_here: int = 0  # the threads this command worked the run with: a resume works it the same way


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


def _work_here(pipeline_run_id: int, name: str, stop: threading.Event, ended: threading.Event) -> None:
    """A thread working the run's units until the run is no longer running; it wakes the wait (`ended`) then, so
    the command ends with its last unit rather than at the wait's next look."""
    try:
        while not stop.is_set():
            again = work(pipeline_run_id=pipeline_run_id, owner=f"command-line:{name}")
            if again is None and not PipelineRun.objects.filter(
                    pk=pipeline_run_id, status=PipelineRun.Status.RUNNING).exists():
                ended.set()
                return
            stop.wait(min(IDLE_SECONDS, again if again is not None else IDLE_SECONDS))
    finally:
        connection.close()


def run_wait(*, pipeline_run: PipelineRun, stream, stall_seconds: float = 600, work_here: int = 0,
             poll_seconds: float = 1.0) -> Waited:
    """Wait until the run ends or stalls, printing its progress when it changes. One worker here works in this
    thread between looks at the progress (it sees this connection's transaction); more work in threads."""
    stop, ended = threading.Event(), threading.Event()
    listener = RunEndListener(pipeline_run.pk, ended)
    threads = [threading.Thread(target=_work_here, args=(pipeline_run.pk, str(n), stop, ended), daemon=True)
               for n in range(work_here if work_here > 1 else 0)]
    for thread in threads:
        thread.start()
    try:
        waited = _watch(pipeline_run, stream, stall_seconds, poll_seconds, inline=work_here == 1, ended=ended,
                        listener=listener)
        waited.work_here = work_here
        return waited
    finally:
        stop.set()
        listener.stop()
        for thread in threads:
            thread.join(timeout=30)


def _watch(pipeline_run: PipelineRun, stream, stall_seconds: float, poll_seconds: float, *,
           inline: bool, ended: threading.Event, listener: RunEndListener) -> Waited:
    # The first reconciler pass comes a period in: a run just started or resumed has nothing for it (run_resume
    # queues a dead worker's lapsed units itself), and at the start it took the GIL from the threads' first calls.
    shown, last_settled, settled_at, reconciled_at = "", -1, time.monotonic(), time.monotonic()
    while True:
        again = work(pipeline_run_id=pipeline_run.pk, owner="command-line", slice_seconds=poll_seconds) \
            if inline else None
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
        settled = counts[Status.DONE] + counts[Status.FAILED]
        if settled != last_settled:
            last_settled, settled_at = settled, time.monotonic()
        elif time.monotonic() - settled_at > stall_seconds:
            return Waited(pipeline_run, stalled=True)
        if counts[Status.RUNNING]:
            listener.start()  # at the first pause it helps (once): from then on the run's end is heard, where it can be
        if (not inline or again) and _pause(pipeline_run, counts, min(poll_seconds, again or poll_seconds), ended,
                                            hearing=listener.hearing):
            ended.clear()  # a thread saw the run end, or its end was heard: one more look, now


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
    if waited.stalled:
        queue = stage_work(pipeline_run.stage).queue
        stream.write(f"{pipeline_run} stalled: no unit finished for a while; it goes on in the background "
                     f"(is a worker running? {worker_command(queue)}). Units not done:")
    elif lines:
        stream.write(f"{pipeline_run} ended with {len(lines)} units not done:")
    for line in lines:
        stream.write(line)
    if not (lines or waited.stalled):
        return 0
    here = waited.work_here if resume_here is None else resume_here
    stream.write(resume_words(pipeline_run=pipeline_run, work_here=here))
    return 1
