"""One episode folder of a run dir: read its files safely, hash them, check them, and write the Episode with its
screenshots in one transaction (blob files are written first: content-addressed, so a rollback leaves nothing wrong)."""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from taskgen.blobs import BlobError, CheckedImage, blob_check_image, blob_rows_ensure, blob_write
from taskgen.db_copy import CopyTable, by_copy, ids_reserve
from taskgen.endings import ending_values
from taskgen.models import Episode, Run, Screenshot, Task
from taskgen.stages.import_.files import (
    FileMissing,
    FileSkipped,
    Skip,
    check_jsonl,
    decode_text,
    inside,
    parse_json,
    parsed_without_nul,
    read_bytes,
    read_listed,
)
from taskgen.stages.import_.tasks_file import TaskLine
from taskgen.stages.judge.images import image_copies_make, image_copies_wanted
from taskgen.steps import step_count

_STEP_NAME = re.compile(r"step_(\d{1,9})\.png")
_ROWS_TEXT_FILES = {"rows.jsonl", "episode.json"}
_LIST_FIELDS = {"actions": "actions", "log": "request_log", "changes": "data_changes"}


@dataclass
class FileRead:
    """One file of the episode folder, read: where it goes (kind/step) and its bytes."""

    relpath: str
    kind: str  # grade_inputs | step | final | row | rows_jsonl | episode_json
    step: int
    data: bytes
    sha256: str = ""


@dataclass
class EpisodeFolder:
    """What an episode folder holds, read and hashed; checked further only when its hash is new."""

    folder: Path
    shown: str
    resolved: Path  # the folder, symlinks followed (inside the run dir)
    files: list[FileRead] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    content_hash: str = ""

    def skip(self, relpath: str, reason: str) -> None:
        self.skips.append(Skip(f"{self.shown}/{relpath}", reason))


def _read_into(ep: EpisodeFolder, path: Path | os.DirEntry, *, root: Path, relpath: str, kind: str, step: int = 0,
               optional: bool = False) -> None:
    """Read one file (a path, or a listed folder entry) into the episode, or say why it is left out."""
    is_json = kind in ("grade_inputs", "rows_jsonl", "episode_json")
    limit = settings.JSON_MAX_BYTES if is_json else settings.BLOB_MAX_BYTES
    try:
        if isinstance(path, os.DirEntry):
            data = read_listed(path, root=root, limit=limit)
        else:
            data = read_bytes(path, root=root, limit=limit)
    except FileMissing as exc:
        if not optional:
            ep.skip(relpath, str(exc))
        return
    except FileSkipped as exc:
        ep.skip(relpath, str(exc))
        return
    ep.files.append(FileRead(relpath, kind, step, data, hashlib.sha256(data).hexdigest()))


def _subfolder_ok(ep: EpisodeFolder, sub: str, root: Path) -> bool:
    """True when the subfolder exists and (through any symlink) stays inside the run dir."""
    folder = ep.folder / sub
    if not folder.is_dir():
        return False
    try:
        inside(folder, root, parent_resolved=ep.resolved)
    except FileSkipped as exc:
        ep.skip(f"{sub}/", str(exc))
        return False
    return True


def _read_steps(ep: EpisodeFolder, sub: str, kind: str, root: Path) -> None:
    try:  # listed with each entry's type, so a plain file is read without a look-up by path first
        with os.scandir(f"{ep.folder}/{sub}") as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        ep.skip(f"{sub}/", f"cannot be listed ({exc.strerror or exc})")
        return
    for entry in entries:
        name = entry.name
        match = _STEP_NAME.fullmatch(name)
        if match:
            _read_into(ep, entry, root=root, relpath=f"{sub}/{name}", kind=kind, step=int(match.group(1)))
        elif not name.startswith(".") and name not in _ROWS_TEXT_FILES:
            ep.skip(f"{sub}/{name}", "not named step_N.png")  # said, so a rows export never loses it silently


def episode_folder_read(*, folder: Path, root: Path, shown: str, line: TaskLine) -> EpisodeFolder:
    """Read every file the importer uses from one episode folder (an entry of the run dir, whose resolved path is
    root) and hash them with the task's place in the run."""
    # The folder itself may be a symlink out of the run dir; one that is not costs an lstat, not a walk of the path.
    resolved = inside(folder, root, parent_resolved=root)
    ep = EpisodeFolder(folder=folder, shown=shown, resolved=resolved)
    has_rows = _subfolder_ok(ep, "rows", root)
    candidates = [("grade_inputs.json", "grade_inputs"), ("final.png", "final")]
    if has_rows:
        candidates += [("rows/rows.jsonl", "rows_jsonl"), ("rows/episode.json", "episode_json")]
    for relpath, kind in candidates:  # each optional: a missing one is no skip (grade_inputs.json's is said later)
        _read_into(ep, folder / relpath, root=root, relpath=relpath, kind=kind, optional=True)
    if _subfolder_ok(ep, "screenshots", root):
        _read_steps(ep, "screenshots", "step", root)
    if has_rows:
        _read_steps(ep, "rows", "row", root)
    digest = hashlib.sha256(f"{line.order}|{line.site_slug}|{line.data.get('task_kind')}\n".encode())
    for item in sorted(ep.files, key=lambda f: f.relpath):
        digest.update(f"{item.relpath}\0{item.sha256}\n".encode())
    for skip in ep.skips:
        digest.update(f"{skip.path}\0{skip.reason}\n".encode())
    ep.content_hash = digest.hexdigest()
    return ep


def _evidence(grade_inputs: dict) -> dict:
    # Every field set, so rewriting a changed episode leaves nothing of its old evidence behind.
    values = {"actions": [], "request_log": [], "data_changes": [], "answer": "", "screen_text": []}
    extra = {}
    for key, value in grade_inputs.items():
        if key in _LIST_FIELDS:
            if not isinstance(value, list):
                raise FileSkipped(f"`{key}` is {type(value).__name__}, not a list")
            values[_LIST_FIELDS[key]] = value
        elif key == "answer":
            values["answer"] = value if isinstance(value, str) else "" if value is None else json.dumps(value)
        elif key == "seen":
            values["screen_text"] = value if isinstance(value, list) else [] if value is None else [value]
        else:
            extra[key] = value
    values["extra"] = extra
    values["steps"] = step_count(values["actions"])
    return values


@dataclass
class CheckedEpisode:
    values: dict
    images: list[tuple[FileRead, CheckedImage]]


def episode_folder_check(ep: EpisodeFolder) -> CheckedEpisode:
    """Parse and check the read files; FileSkipped (naming grade_inputs.json) when the episode cannot be imported."""
    by_kind = {f.kind: f for f in ep.files if f.kind in ("grade_inputs", "rows_jsonl", "episode_json")}
    if "grade_inputs" not in by_kind:
        reason = next((s.reason for s in ep.skips if s.path.endswith("/grade_inputs.json")), "missing")
        raise FileSkipped(f"grade_inputs.json: {reason}")
    try:
        text = decode_text(by_kind["grade_inputs"].data)
        grade_inputs = parse_json(text)
        if not isinstance(grade_inputs, dict):
            raise FileSkipped(f"holds JSON {type(grade_inputs).__name__}, not an object")
        values = _evidence(parsed_without_nul(text, grade_inputs))
    except FileSkipped as exc:
        raise FileSkipped(f"grade_inputs.json: {exc}") from exc
    values.update(_rows(ep, by_kind))
    values.update(_ending(values))
    return CheckedEpisode(values=values, images=_images(ep))


def _ending(values: dict) -> dict:
    """How the episode ended (its own fields, out of `extra`), and so whether it is a failed episode."""
    extra = values["extra"]
    recorded = {key: extra.pop(key) for key in ("finished", "end_reason", "end_step") if key in extra}
    recorded["error"] = extra.get("error")
    try:
        summary = json.loads(values["episode_json"]) if values["episode_json"] else {}
    except ValueError:
        summary = {}
    return ending_values(recorded=recorded, summary=summary if isinstance(summary, dict) else {},
                         actions=values["steps"])


def _rows(ep: EpisodeFolder, by_kind: dict[str, FileRead]) -> dict:
    values = {"rows_jsonl": "", "episode_json": "", "row_count": 0, "has_rows": False}
    if "rows_jsonl" in by_kind:
        try:
            text = decode_text(by_kind["rows_jsonl"].data)
            values.update(row_count=check_jsonl(text), rows_jsonl=text, has_rows=True)
        except FileSkipped as exc:
            ep.skip("rows/rows.jsonl", str(exc))
    if "episode_json" in by_kind:
        try:
            text = decode_text(by_kind["episode_json"].data)
            parse_json(text)
            values["episode_json"] = text
        except FileSkipped as exc:
            ep.skip("rows/episode.json", str(exc))
    return values


def _images(ep: EpisodeFolder) -> list[tuple[FileRead, CheckedImage]]:
    images = []
    for item in ep.files:
        if item.kind not in ("step", "final", "row"):
            continue
        try:
            images.append((item, blob_check_image(data=item.data, sha256=item.sha256)))
        except BlobError as exc:
            ep.skip(item.relpath, str(exc))
    last_step = max((f.step for f, _ in images if f.kind == "step"), default=-1)
    for item, _ in images:
        if item.kind == "final":
            item.step = last_step + 1  # the final screen sorts after the last step
    return images


@dataclass
class PreparedEpisode:
    """An episode folder made ready for the database (no file bytes: they are in the blob store already).

    `unchanged`: its files hash as stored. `values` is None when the episode cannot be imported (see `skips`).
    """

    task_id: str
    content_hash: str = ""
    unchanged: bool = False
    values: dict | None = None
    images: list[tuple[str, int, str, CheckedImage]] = field(default_factory=list)  # kind, step, name, image
    skips: list[Skip] = field(default_factory=list)


def episode_prepare(*, folder: Path, root: Path, shown: str, line: TaskLine, known_hash: str) -> PreparedEpisode:
    """Read, hash and check one episode folder and write its images to the blob store; touches no database, so
    import workers can run it in other processes."""
    try:
        ep = episode_folder_read(folder=folder, root=root, shown=shown, line=line)
    except FileSkipped as exc:
        return PreparedEpisode(task_id=line.task_id, skips=[Skip(shown, str(exc))])
    prepared = PreparedEpisode(task_id=line.task_id, content_hash=ep.content_hash, skips=ep.skips)
    if known_hash == ep.content_hash:
        prepared.unchanged = True
        return prepared
    try:
        checked = episode_folder_check(ep)
    except FileSkipped as exc:
        prepared.skips.append(Skip(f"{shown}/grade_inputs.json", f"episode not imported: {exc}"))
        return prepared
    copies = image_copies_wanted()  # asked once an episode: it reads settings and the provider's abilities
    for item, image in checked.images:
        blob_write(sha256=image.sha256, data=item.data)
        if item.kind != "row" and copies:  # the judge's downscaled copies, made here once rather than while judging
            image_copies_make(sha256=image.sha256, data=item.data, names=copies)
    prepared.values = dict(checked.values, source_path=str(folder), content_hash=ep.content_hash,
                           extra=dict(checked.values["extra"], **_skipped_note(ep)))
    prepared.images = [(item.kind, item.step, item.relpath.rpartition("/")[2], image) for item, image in checked.images]
    return prepared


def _skipped_note(ep: EpisodeFolder) -> dict:
    # Kept on the episode so its page can say which of its files were left out, and why.
    return {"import_skipped": [str(s) for s in ep.skips]} if ep.skips else {}


def episode_save(*, run: Run, task: Task, line: TaskLine, prepared: PreparedEpisode, existing_id: int | None,
                 blob_ids: dict[str, int]) -> None:
    """Write a prepared episode and its screenshots in one transaction; an existing episode is replaced in place."""
    episodes_save(run=run, items=[(task, line, prepared, existing_id)], blob_ids=blob_ids)


def episodes_save(*, run: Run, items: list[tuple[Task, TaskLine, PreparedEpisode, int | None]],
                  blob_ids: dict[str, int]) -> None:
    """Write prepared episodes (task, line, prepared, existing episode id or None) and their screenshots in one
    transaction: new episodes, their blob rows and screenshots in one statement each (an import writes them a batch
    at a time: a transaction per episode was six round trips and a commit each, most of an import's time); an
    existing episode is replaced in place. A DatabaseError rolls back all of them.

    `blob_ids` (sha -> Blob id) is this import's memory of blobs already in the database; it grows after commits.
    """
    with transaction.atomic():
        _commit_without_waiting_for_disk()
        wanted = {image.sha256: image for *_, prepared, _ in items for *_, image in prepared.images
                  if image.sha256 not in blob_ids}
        new_ids = blob_rows_ensure(images=wanted.values())
        created = iter(_episodes_create(run=run, items=[(t, line, p) for t, line, p, i in items if i is None]))
        screenshots = []
        for task, line, prepared, existing_id in items:
            episode_id = next(created) if existing_id is None else _episode_write(
                run=run, task=task, values=_values(task, line, prepared), existing_id=existing_id)
            screenshots += [{"episode_id": episode_id, "kind": kind, "step": step, "name": name,
                             "blob_id": new_ids.get(image.sha256) or blob_ids[image.sha256]}
                            for kind, step, name, image in prepared.images]
        screenshots_write(screenshots)
    blob_ids.update(new_ids)  # only after the commit: a rolled-back blob row must not be remembered


def _episodes_create(*, run: Run, items: list[tuple[Task, TaskLine, PreparedEpisode]]) -> list[int]:
    """New episodes' rows (COPY on PostgreSQL, the ORM elsewhere: the same rows); their ids in order."""
    if not by_copy():
        return [e.pk for e in Episode.objects.bulk_create(
            [Episode(run=run, task=task, **_values(task, line, prepared)) for task, line, prepared in items])]
    ids = ids_reserve(Episode, len(items))
    CopyTable(Episode, with_pk=True).write(
        dict(_values(task, line, prepared), id=episode_id, run_id=run.pk, task_id=task.pk)
        for episode_id, (task, line, prepared) in zip(ids, items, strict=True))
    return ids


def screenshots_write(rows: list[dict]) -> None:
    """Screenshot rows (dicts by attname) in one statement: COPY on PostgreSQL, the ORM elsewhere."""
    if by_copy():
        CopyTable(Screenshot, with_pk=False).write(rows)
    else:
        Screenshot.objects.bulk_create([Screenshot(**row) for row in rows])


def _values(task: Task, line: TaskLine, prepared: PreparedEpisode) -> dict:
    return dict(prepared.values, site_id=task.site_id, task_kind=task.task_kind, task_order=line.order,
                screens=sum(kind != Screenshot.Kind.ROW for kind, *_ in prepared.images))


def _commit_without_waiting_for_disk() -> None:
    """On PostgreSQL, let this transaction's commit return before its WAL is flushed. Safe here: the database stays
    consistent, and the few episodes a crash could lose are imported again by the next (idempotent) import."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _episode_write(*, run: Run, task: Task, values: dict, existing_id: int | None) -> int:
    if existing_id is None:
        return Episode.objects.create(run=run, task=task, **values).pk
    Episode.objects.filter(pk=existing_id).update(**values)
    Screenshot.objects.filter(episode_id=existing_id).delete()
    return existing_id
