"""The tasks of an imported run: find the tasks file, read its lines (each checked), save Sites and Tasks in bulk."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction

from taskgen.db_copy import CopyTable, by_copy, ids_reserve
from taskgen.models import Site, Task
from taskgen.stages.import_.files import (
    FileSkipped,
    ImportFailed,
    Skip,
    check_plain_name,
    decode_text,
    jsonl_lines,
    parse_json,
    read_bytes,
    without_nul,
)

_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,200}")
_TEXT_LIMITS = {"kind": 40, "start_path": 1000, "macro": 200}
TASK_FIELDS = ["site", "instruction", "task_kind", "source", "start_path", "macro", "verifier", "raw"]


@dataclass
class TaskLine:
    """One checked line of a tasks file; `order` is its line number (the rows stage walks each site in file order)."""

    task_id: str
    order: int
    site_slug: str
    data: dict


@dataclass
class TaskSet:
    lines: dict[str, TaskLine] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)
    added: int = 0
    updated: int = 0


def tasks_file_locate(*, run_dir: Path, tasks_file: Path | None) -> Path:
    """The tasks file: the one given, else RUN_DIR/tasks.jsonl, else a tasks.jsonl beside RUN_DIR."""
    candidates = [tasks_file] if tasks_file else [run_dir / "tasks.jsonl", run_dir.parent / "tasks.jsonl"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise ImportFailed(f"no tasks file: tried {tried} (pass --tasks FILE)")


def _check_line(data: object) -> TaskLine:
    if not isinstance(data, dict):
        raise FileSkipped("is not a JSON object")
    task_id = check_plain_name(data.get("task_id"))
    site = data.get("site")
    if site is None:
        raise FileSkipped(f"task {task_id}: no site")
    if not isinstance(site, str) or not _SLUG.fullmatch(site):
        raise FileSkipped(f"task {task_id}: site {str(site)[:80]!r} is not a slug")
    if not isinstance(data.get("instruction"), str) or not data["instruction"].strip():
        raise FileSkipped(f"task {task_id}: no instruction")
    if data.get("task_kind", "action") not in Task.Kind.values:
        raise FileSkipped(f"task {task_id}: task_kind {str(data.get('task_kind'))[:40]!r} is not info or action")
    for key, limit in _TEXT_LIMITS.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise FileSkipped(f"task {task_id}: {key} is not text of at most {limit} characters")
    return TaskLine(task_id=task_id, order=0, site_slug=site, data=without_nul(data))


def tasks_read(*, path: Path, shown: str) -> tuple[dict[str, TaskLine], list[Skip]]:
    """The tasks file's good lines by task id (first line wins), and a Skip for each bad or repeated line."""
    try:
        text = decode_text(read_bytes(path, root=path.resolve().parent, limit=settings.JSON_MAX_BYTES))
    except FileSkipped as exc:
        raise ImportFailed(f"{shown}: {exc}") from exc
    lines: dict[str, TaskLine] = {}
    skips = []
    for number, raw in jsonl_lines(text):
        try:
            line = _check_line(parse_json(raw))
        except FileSkipped as exc:
            skips.append(Skip(f"{shown}:{number}", str(exc)))
            continue
        first = lines.get(line.task_id)
        if first is not None:
            same = "repeats" if first.data == line.data else "differs from"
            skips.append(Skip(f"{shown}:{number}", f"task {line.task_id} {same} line {first.order}; the first is kept"))
            continue
        line.order = number
        lines[line.task_id] = line
    return lines, skips


def _base_url(start_path: str) -> str:
    parts = urlsplit(start_path)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else ""


def _sites_ensure(lines: list[TaskLine]) -> dict[str, Site]:
    sites = {s.slug: s for s in Site.objects.filter(slug__in={line.site_slug for line in lines})}
    new = {}
    for line in lines:
        if line.site_slug not in sites and line.site_slug not in new:
            new[line.site_slug] = Site(slug=line.site_slug, name=line.site_slug,
                                       base_url=_base_url(line.data.get("start_path") or ""))
    # In slug order, for the reason tasks_save writes new tasks in task id order.
    Site.objects.bulk_create(sorted(new.values(), key=lambda site: site.slug), ignore_conflicts=True)
    if new:
        sites.update({s.slug: s for s in Site.objects.filter(slug__in=new)})
    return sites


def _task_values(line: TaskLine, site: Site) -> dict:
    data = line.data
    return {"site_id": site.pk, "instruction": data["instruction"], "task_kind": data.get("task_kind") or "action",
            "source": data.get("kind") or "proposed", "start_path": data.get("start_path") or "",
            "macro": data.get("macro") or "", "verifier": data.get("verifier"), "raw": data}


def _differs(task: Task, values: dict) -> bool:
    return any(getattr(task, key) != value for key, value in values.items())


def _tasks_create(new: list[dict]) -> int:
    """New tasks' rows (values by attname), how many this import made: COPY on PostgreSQL, in a savepoint, so that a
    task another import made meanwhile sends them all the ORM's way, which leaves it as it is; the ORM elsewhere."""
    if not new:
        return 0
    if by_copy():
        try:
            with transaction.atomic():
                ids = ids_reserve(Task, len(new))
                rows = (dict(values, id=task_id) for task_id, values in zip(ids, new, strict=True))
                CopyTable(Task, with_pk=True).write(rows)
            return len(new)
        except IntegrityError:
            pass
    made_meanwhile = Task.objects.filter(task_id__in=[values["task_id"] for values in new]).count()
    Task.objects.bulk_create([Task(**values) for values in new], ignore_conflicts=True)
    return len(new) - made_meanwhile


@transaction.atomic
def tasks_save(*, lines: dict[str, TaskLine]) -> TaskSet:
    """Sites and Tasks for the lines: new ones created in one statement, changed ones (the file was edited) updated.
    The tasks it returns hold what writing their episodes reads (id, site, kind), not the whole line again."""
    result = TaskSet(lines=lines)
    sites = _sites_ensure(list(lines.values()))
    existing = {t.task_id: t for t in Task.objects.filter(task_id__in=lines)}
    new, changed = [], []
    for task_id, line in lines.items():
        values = _task_values(line, sites[line.site_slug])
        task = existing.get(task_id)
        if task is None:
            new.append(dict(values, task_id=task_id))
        elif _differs(task, values):
            for key, value in values.items():
                setattr(task, key, value)
            changed.append(task)
    # New tasks in task id order, whatever the file's: two imports sharing new tasks then take the rows' locks in one
    # order and never wait on each other in a cycle (PostgreSQL would end it by failing one import: a deadlock).
    result.added = _tasks_create(sorted(new, key=lambda values: values["task_id"]))
    Task.objects.bulk_update(changed, TASK_FIELDS)
    result.tasks = {t.task_id: t for t in Task.objects.filter(task_id__in=lines).only("task_id", "site", "task_kind")}
    result.updated = len(changed)
    return result
