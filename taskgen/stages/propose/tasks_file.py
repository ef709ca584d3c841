"""tasks.jsonl as the reference writes it: one JSON object a line, non-ASCII kept, each site's tasks together."""
from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from taskgen.models import Task
from taskgen.names import plain_name_check
from taskgen.stages.paths import data_root
from taskgen.stages.propose.keep import tasks_jsonl_line


def task_reference_record(task: Task) -> dict:
    """The task's line in the reference's key order, with a reviewer's edits to its instruction and kind applied;
    other keys of the line it was imported with follow (the database does not keep a line's key order)."""
    raw = task.raw or {}
    record = {"kind": raw.get("kind") or task.source, "task_id": task.task_id, "site": task.site.slug,
              "sites": raw.get("sites") or [task.site.slug], "macro": task.macro, "macros": raw.get("macros") or [],
              "instruction": task.instruction, "start_path": task.start_path, "task_kind": task.task_kind,
              "verifier": task.verifier}
    return {**record, **{key: value for key, value in raw.items() if key not in record}}


def sites_in_file(path: Path) -> set[str]:
    """The sites a tasks file already has (a propose run keeps them, as the reference does); lines that are not
    JSON objects are ignored here (the import stage reports them)."""
    if not path.is_file():
        return set()
    sites = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("site"), str):
            sites.add(data["site"])
    return sites


def tasks_jsonl_append(*, path: Path, tasks: Iterable[Task]) -> int:
    """Append the tasks' lines to `path` (made with its folder when missing); the number of lines written."""
    lines = [tasks_jsonl_line(task_reference_record(task)) for task in tasks]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write("".join(lines))
    return len(lines)


def reviewed_tasks(*, sites: list[str], include_all: bool = False):
    """The approved tasks of the sites (or, when `include_all`, every task not dropped), site by site in the order
    given, each site's in the order they were proposed."""
    states = [Task.ReviewState.APPROVED] + ([Task.ReviewState.PROPOSED] if include_all else [])
    tasks = []
    for slug in sites:
        tasks += list(Task.objects.filter(site__slug=slug, review_state__in=states).select_related("site")
                      .order_by("created_at", "pk"))
    return tasks


def reviewed_tasks_file_write(*, sites: list[str], include_all: bool, name: str) -> Path:
    """Write the sites' approved tasks (see `reviewed_tasks`) as DATA_ROOT/approved/<name>.jsonl for an attempt
    run; ValueError when there are none."""
    plain_name_check(name, what="the run name")  # NotPlainName is a ValueError
    tasks = reviewed_tasks(sites=sites, include_all=include_all)
    if not tasks:
        which = "not dropped" if include_all else "approved"
        raise ValueError(f"no {which} tasks for {', '.join(sites) or 'any site'}: review them on the Tasks page first")
    folder = data_root() / "approved"
    path = folder / f"{name}.jsonl"
    if path.exists():
        path = folder / f"{name}-{datetime.now(UTC):%Y%m%d-%H%M%S-%f}.jsonl"
    tasks_jsonl_append(path=path, tasks=tasks)
    return path
