"""The command line's wait for a run: a progress bar, the reconciler run while waiting, a stall detected (no unit
settled for `stall_seconds`: it names the open units and why), and, at the end, every unit that is not done.

With `work_here` threads the command line works the run's units itself, through the same engine as a worker.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from taskgen.engine.tasks import reconcile_now
from taskgen.engine.units import Status, unit_counts, units_not_done
from taskgen.engine.worker import work
from taskgen.models import PipelineRun

BAR = 30


@dataclass
class Waited:
    pipeline_run: PipelineRun
    stalled: bool = False


def progress_line(pipeline_run: PipelineRun, counts) -> str:
    """`[#####.....] 12/40 done, 1 failed, 3 running, 24 queued`."""
    total = max(1, pipeline_run.total)
    settled = counts[Status.DONE] + counts[Status.FAILED]
    filled = BAR * settled // total
    return (f"[{'#' * filled}{'.' * (BAR - filled)}] {counts[Status.DONE]}/{pipeline_run.total} done, "
            f"{counts[Status.FAILED]} failed, {counts[Status.RUNNING]} running, {counts[Status.QUEUED]} queued")


def _work_here(pipeline_run_id: int, name: str, stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            again = work(pipeline_run_id=pipeline_run_id, owner=f"command-line:{name}")
            if again is None and not PipelineRun.objects.filter(
                    pk=pipeline_run_id, status=PipelineRun.Status.RUNNING).exists():
                return
            stop.wait(min(1.0, again if again is not None else 1.0))
    finally:
        connection.close()


def run_wait(*, pipeline_run: PipelineRun, stream, stall_seconds: float = 600, work_here: int = 0,
             poll_seconds: float = 1.0) -> Waited:
    """Wait until the run ends or stalls, printing its progress when it changes. One worker here works in this
    thread between looks at the progress (it sees this connection's transaction); more work in threads."""
    stop = threading.Event()
    threads = [threading.Thread(target=_work_here, args=(pipeline_run.pk, str(n), stop), daemon=True)
               for n in range(work_here if work_here > 1 else 0)]
    for thread in threads:
        thread.start()
    try:
        return _watch(pipeline_run, stream, stall_seconds, poll_seconds, inline=work_here == 1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


def _watch(pipeline_run: PipelineRun, stream, stall_seconds: float, poll_seconds: float, *,
           inline: bool) -> Waited:
    shown, last_settled, settled_at, reconciled_at = "", -1, time.monotonic(), 0.0
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
        if not inline or again:
            time.sleep(min(poll_seconds, again or poll_seconds))


def units_not_done_lines(pipeline_run: PipelineRun, limit: int = 200) -> list[str]:
    """One line per unit that is not done: its key, status, tries and last error."""
    units = units_not_done(pipeline_run_id=pipeline_run.pk, limit=limit)
    return [f"  {u.key}: {u.status} after {u.attempts} tries" + (f": {u.last_error}" if u.last_error else "")
            for u in units]


def wait_report(*, waited: Waited, stream) -> int:
    """Say how the wait ended; 0 when every unit is done, else 1 with every unit not done named."""
    pipeline_run = waited.pipeline_run
    lines = units_not_done_lines(pipeline_run)
    if waited.stalled:
        stream.write(f"{pipeline_run} stalled: no unit finished for a while; it goes on in the background "
                     f"(is a worker running? celery -A taskgen worker -B). Units not done:")
    elif lines:
        stream.write(f"{pipeline_run} ended with {len(lines)} units not done:")
    for line in lines:
        stream.write(line)
    return 1 if lines or waited.stalled else 0
