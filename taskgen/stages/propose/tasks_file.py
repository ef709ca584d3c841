"""tasks.jsonl as the reference writes it: one JSON object a line, non-ASCII kept, each site's tasks together."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from taskgen.models import Task
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
