"""A hand-made run dir in the reference's format, and a loader that puts it in the database as an import would.

The loader is deliberately small (the real importer is another stage): Site, Task, Episode with its rows text exactly
as read, row images as blobs, and the judge dir as Judgments.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from taskgen.blobs import blob_store_image
from taskgen.models import Episode, JudgeConfig, Judgment, Run, Screenshot, Site, Task


@dataclass(frozen=True)
class HandTask:
    site: str
    n: int
    rows: int | None  # None: the episode has no rows folder; 0: an empty rows.jsonl
    judged: bool | None = True  # None: no judge file
    attempted: bool = True  # False: a line in tasks.jsonl but no episode folder (the harness never ran it)

    @property
    def task_id(self) -> str:
        return f"tg-{self.site}-{self.n}"


def png(seed: int, size: tuple[int, int] = (24, 16)) -> bytes:
    image = Image.new("RGB", size, ((seed * 37) % 256, (seed * 91) % 256, (seed * 13) % 256))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_run_dir(root: Path, tasks: list[HandTask]) -> tuple[Path, Path]:
    """tasks.jsonl and run/<task_id>/..., run_judge/<task_id>.json under root; returns (run dir, tasks file)."""
    run = root / "run"
    judge = root / "run_judge"
    judge.mkdir(parents=True)
    run.mkdir()
    lines = []
    for i, t in enumerate(tasks):
        lines.append(json.dumps({"kind": "proposed", "task_id": t.task_id, "site": t.site, "sites": [t.site],
                                 "instruction": f"Do thing {t.n} on {t.site} — «ünïcode»", "task_kind": "action",
                                 "start_path": "/", "verifier": None}))
        if not t.attempted:
            continue
        folder = run / t.task_id
        folder.mkdir(parents=True)
        (folder / "grade_inputs.json").write_text(json.dumps({"actions": [], "answer": "", "log": [], "changes": [],
                                                              "seen": []}))
        if t.rows is not None:
            rows = folder / "rows"
            rows.mkdir()
            body = "".join(json.dumps({"step": s, "text": f"row {s} of {t.task_id} ✓"}, ensure_ascii=False) + "\n"
                           for s in range(t.rows))
            (rows / "rows.jsonl").write_bytes(body.encode("utf-8"))
            (rows / "episode.json").write_bytes(json.dumps({"task_id": t.task_id, "n": i}, indent=2).encode())
            for s in range(t.rows):
                (rows / f"step_{s}.png").write_bytes(png(i * 100 + s))
        if t.judged is not None:
            verdict = "SUCCESS" if t.judged else "NOT SUCCESS"
            response = json.dumps({"parts": [{"part": "do it", "done": bool(t.judged), "evidence": "rows"}],
                                   "verdict": verdict})
            (judge / f"{t.task_id}.json").write_text(json.dumps(
                {"task_id": t.task_id, "predicted_label": int(t.judged), "verdict": verdict, "response": response,
                 "model": "gemini-3.5-flash"}))
    tasks_file = root / "tasks.jsonl"
    tasks_file.write_text("\n".join(lines) + "\n")
    return run, tasks_file


def load_run_dir(run_dir: Path, tasks_file: Path, config: JudgeConfig | None = None) -> Run:
    """The hand-made run dir as database rows (one Episode per task folder)."""
    run = Run.objects.create(name=run_dir.parent.name + "-" + run_dir.name, source_dir=str(run_dir),
                             tasks_file=str(tasks_file))
    config = config or JudgeConfig.objects.get_or_create(provider="gemini", model="gemini-3.5-flash",
                                                         prompt_version="reference", image_policy="default")[0]
    for order, line in enumerate(tasks_file.read_text().splitlines()):
        spec = json.loads(line)
        site = Site.objects.get_or_create(slug=spec["site"])[0]
        task = Task.objects.create(task_id=spec["task_id"], site=site, instruction=spec["instruction"], raw=spec)
        if (run_dir / spec["task_id"]).is_dir():
            _load_episode(run, task, order, run_dir / spec["task_id"], config)
    return run


def _load_episode(run: Run, task: Task, order: int, folder: Path, config: JudgeConfig) -> None:
    rows = folder / "rows"
    rows_text = (rows / "rows.jsonl").read_bytes().decode("utf-8") if (rows / "rows.jsonl").exists() else ""
    episode = Episode.objects.create(
        run=run, task=task, site=task.site, task_order=order, rows_jsonl=rows_text,
        episode_json=(rows / "episode.json").read_bytes().decode() if (rows / "episode.json").exists() else "",
        has_rows=(rows / "rows.jsonl").exists(), row_count=sum(1 for x in rows_text.split("\n") if x.strip()),
        content_hash=f"hash-{task.task_id}")
    for image in sorted(rows.glob("step_*.png")) if rows.exists() else []:
        step = int(image.stem.split("_")[1])
        Screenshot.objects.create(episode=episode, kind=Screenshot.Kind.ROW, step=step, name=image.name,
                                  blob=blob_store_image(data=image.read_bytes()))
    verdict = folder.parent.parent / f"{folder.parent.name}_judge" / f"{task.task_id}.json"
    if verdict.exists():
        label = json.loads(verdict.read_text())["predicted_label"]
        Judgment.objects.create(episode=episode, config=config, verdict="SUCCESS" if label == 1 else "NOT SUCCESS")
