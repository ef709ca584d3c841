"""Import a reference run dir: its tasks, every episode folder, verifier results and an existing judge folder.

Idempotent: each episode's files are hashed, so importing the same folder again changes nothing, a grown folder adds
only its new episodes, and an episode whose files changed is rewritten. One bad episode or file never stops the
import: it is skipped with a reason (a `Skip`), and one transaction per episode means nothing is left half-written.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError

from taskgen.models import Episode, Run
from taskgen.names import PLAIN_NAME_RULE, is_plain_name
from taskgen.stages.import_.episode import PreparedEpisode, episode_prepare, episode_save, episodes_save
from taskgen.stages.import_.files import ImportFailed, Skip
from taskgen.stages.import_.results import judgments_import, verifier_results_import
from taskgen.stages.import_.tasks_file import TaskLine, TaskSet, tasks_file_locate, tasks_read, tasks_save

__all__ = ["ImportFailed", "ImportSummary", "Skip", "import_run_dir"]

SAVE_BATCH = 50  # episodes written per transaction
PARALLEL_FROM = 64  # fewer episodes than this are prepared in this process: starting workers would cost more


@dataclass
class ImportSummary:
    """What one import did. Counts of verifier results and judgments are rows written (new or changed)."""

    run: Run
    episodes_added: int = 0
    episodes_updated: int = 0
    episodes_unchanged: int = 0
    screenshots: int = 0
    verifier_results: int = 0
    verifier_results_unchanged: int = 0
    judgments: int = 0
    judgments_unchanged: int = 0
    tasks_added: int = 0
    tasks_updated: int = 0
    tasks_without_episode: int = 0
    skipped: list[Skip] = field(default_factory=list)

    @property
    def episodes_imported(self) -> int:
        return self.episodes_added + self.episodes_updated + self.episodes_unchanged

    def as_dict(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if k not in ("run", "skipped")}
        data.update(run=self.run.name, run_id=self.run.pk, episodes_imported=self.episodes_imported,
                    skipped=[{"path": s.path, "reason": s.reason} for s in self.skipped])
        return data


def _shown(path: Path, base: Path) -> str:
    """A path as the summary names it: relative to the folder that holds the run dir when it is below it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _run_for(*, run_dir: Path, tasks_path: Path, name: str | None) -> Run:
    name = name or run_dir.name
    if len(name) > 200 or len(str(run_dir)) > 1000 or len(str(tasks_path)) > 1000:
        raise ImportFailed("the run name (200) or a path (1,000 characters) is too long to record")
    run, created = Run.objects.get_or_create(
        name=name, defaults={"source_dir": str(run_dir), "tasks_file": str(tasks_path), "origin": Run.Origin.IMPORT})
    if not created and run.source_dir and run.source_dir != str(run_dir):
        raise ImportFailed(f"a run named {name!r} was imported from {run.source_dir}; pass --name to import "
                           f"{run_dir} as another run")
    if not created and (run.source_dir, run.tasks_file) != (str(run_dir), str(tasks_path)):
        run.source_dir, run.tasks_file = str(run_dir), str(tasks_path)
        run.save(update_fields=["source_dir", "tasks_file", "updated_at"])
    return run


def _episode_folders(run_dir: Path, lines: dict[str, TaskLine], base: Path, summary: ImportSummary) -> list[Path]:
    """The run dir's episode folders: each named by a plain task id with a line in the tasks file."""
    folders = []
    for path in sorted(run_dir.iterdir()):
        if path.name.startswith(".") or not path.is_dir():
            continue
        if not is_plain_name(path.name):
            summary.skipped.append(Skip(_shown(path, base), f"folder name is not a plain task id ({PLAIN_NAME_RULE})"))
        elif path.name not in lines:
            summary.skipped.append(Skip(_shown(path, base), "no line for this task id in the tasks file"))
        else:
            folders.append(path)
    return folders


def _prepare_one(job: tuple) -> PreparedEpisode:
    folder, root, shown, line, known_hash = job
    return episode_prepare(folder=folder, root=root, shown=shown, line=line, known_hash=known_hash)


@contextmanager
def _preparing(jobs: list[tuple]) -> Iterator[Iterator[PreparedEpisode]]:
    """Prepared episodes in folder order; file work (read, hash, check, blob writes) runs in worker processes when
    the run is big enough to pay for them, started at once, while this process writes the database."""
    workers = min(settings.IMPORT_WORKERS, os.cpu_count() or 1)
    if workers < 2 or len(jobs) < PARALLEL_FROM or multiprocessing.current_process().daemon:
        yield map(_prepare_one, jobs)  # a daemonic process (a Celery pool child) may not start workers
        return
    # fork: workers inherit settings as they are (test overrides too) and never touch the database. Frozen first:
    # a worker's collections then skip the ~100,000 objects it inherits (Django's, the app's), which they would walk
    # (and copy, page by page, by touching them) every time, and so do this process's while it writes the batches.
    gc.freeze()
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        yield pool.map(_prepare_one, jobs, chunksize=8)  # every folder handed out now: the workers start
    finally:  # when the import stops early, queued folders are dropped, not prepared for nothing
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()


def _count(summary: ImportSummary, prepared: PreparedEpisode, existed: bool) -> None:
    summary.skipped.extend(prepared.skips)
    if prepared.unchanged:
        summary.episodes_unchanged += 1
    elif prepared.values is not None:
        summary.screenshots += len(prepared.images)
        if existed:
            summary.episodes_updated += 1
        else:
            summary.episodes_added += 1


def _save(*, prepared: PreparedEpisode, task_set: TaskSet, summary: ImportSummary, episode_id: int | None,
          blob_ids: dict[str, int]) -> None:
    task_id = prepared.task_id
    try:
        episode_save(run=summary.run, task=task_set.tasks[task_id], line=task_set.lines[task_id],
                     prepared=prepared, existing_id=episode_id, blob_ids=blob_ids)
    except DatabaseError as exc:  # a value the database refuses: this episode is rolled back, the import goes on
        prepared.values = None
        prepared.skips.append(Skip(f"{Path(summary.run.source_dir).name}/{task_id}",
                                   f"the database refused the episode ({type(exc).__name__}: {str(exc)[:200]})"))


def _save_batch(*, batch: list[tuple[PreparedEpisode, int | None]], task_set: TaskSet, summary: ImportSummary,
                blob_ids: dict[str, int]) -> None:
    """The batch's episodes in one transaction; when the database refuses any, each again in its own, so the one it
    refuses is skipped alone."""
    if not batch:
        return
    items = [(task_set.tasks[p.task_id], task_set.lines[p.task_id], p, episode_id) for p, episode_id in batch]
    try:
        episodes_save(run=summary.run, items=items, blob_ids=blob_ids)
    except DatabaseError:
        for prepared, episode_id in batch:
            _save(prepared=prepared, task_set=task_set, summary=summary, episode_id=episode_id, blob_ids=blob_ids)


def _import_episodes(*, folders: list[Path], root: Path, base: Path, lines: dict[str, TaskLine],
                     summary: ImportSummary, progress: Callable[[int, int], None] | None) -> None:
    """The episodes of `folders`, prepared by the workers while this process saves the tasks file's Sites and
    Tasks (0.25 s of a 2,000-episode import's 2.3-2.8 s, one core idle meanwhile), then written in batches."""
    existing = {t: (i, h) for t, i, h in Episode.objects.filter(run=summary.run)
                .values_list("task__task_id", "id", "content_hash")}
    jobs = [(f, root, _shown(f, base), lines[f.name], existing.get(f.name, (None, ""))[1]) for f in folders]
    with _preparing(jobs) as prepared_episodes:
        task_set = tasks_save(lines=lines)
        summary.tasks_added, summary.tasks_updated = task_set.added, task_set.updated
        _episodes_write(prepared_episodes, total=len(jobs), existing=existing, task_set=task_set, summary=summary,
                        progress=progress)


def _episodes_write(prepared_episodes: Iterator[PreparedEpisode], *, total: int, existing: dict[str, tuple[int, str]],
                    task_set: TaskSet, summary: ImportSummary, progress: Callable[[int, int], None] | None) -> None:
    """Write prepared episodes as they come, SAVE_BATCH to a transaction, counting each in the summary; `existing`:
    the run's episodes already stored (task id -> id, content hash)."""
    blob_ids: dict[str, int] = {}
    done, pending = 0, []  # prepared episodes waiting for their batch to be written

    def flush() -> None:
        nonlocal done
        _save_batch(batch=[(p, i) for p, i in pending if p.values is not None], task_set=task_set, summary=summary,
                    blob_ids=blob_ids)
        for prepared, episode_id in pending:
            done += 1
            _count(summary, prepared, existed=episode_id is not None)
            if progress is not None:
                progress(done, total)
        pending.clear()

    for prepared in prepared_episodes:
        pending.append((prepared, existing.get(prepared.task_id, (None, ""))[0]))
        if len(pending) >= SAVE_BATCH:
            flush()
    flush()


def import_run_dir(*, run_dir: Path, tasks_file: Path | None = None, name: str | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   verifier_source: str | None = None) -> ImportSummary:
    """Import RUN_DIR (tasks from tasks_file, RUN_DIR/tasks.jsonl or a tasks.jsonl beside it) as the run `name`
    (default: the folder's name); ImportFailed when there is no run dir or no readable tasks file."""
    run_dir = Path(run_dir).expanduser().absolute()
    if not run_dir.is_dir():
        raise ImportFailed(f"{run_dir} is not a folder")
    root, base = run_dir.resolve(), run_dir.parent
    tasks_path = tasks_file_locate(run_dir=run_dir, tasks_file=Path(tasks_file).absolute() if tasks_file else None)
    lines, task_skips = tasks_read(path=tasks_path, shown=_shown(tasks_path, base))
    summary = ImportSummary(run=_run_for(run_dir=run_dir, tasks_path=tasks_path, name=name), skipped=task_skips)
    folders = _episode_folders(run_dir, lines, base, summary)
    summary.tasks_without_episode = len(lines) - len(folders)
    _import_episodes(folders=folders, root=root, base=base, lines=lines, summary=summary, progress=progress)
    _import_beside(run_dir=run_dir, root=root, base=base, summary=summary, verifier_source=verifier_source)
    return summary


def _import_beside(*, run_dir: Path, root: Path, base: Path, summary: ImportSummary,
                   verifier_source: str | None) -> None:
    episode_ids = dict(Episode.objects.filter(run=summary.run).values_list("task__task_id", "id"))
    results = verifier_results_import(run_dir=run_dir, root=root, shown=_shown(run_dir, base),
                                      episode_ids=episode_ids, source=verifier_source)
    judged = judgments_import(run_dir=run_dir, shown=_shown(run_dir, base), episode_ids=episode_ids)
    summary.verifier_results, summary.verifier_results_unchanged = results.written, results.unchanged
    summary.judgments, summary.judgments_unchanged = judged.written, judged.unchanged
    summary.skipped.extend(results.skips + judged.skips)
