"""The import's two write paths (COPY on PostgreSQL, the ORM's bulk_create elsewhere) write the same rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from taskgen import blobs
from taskgen.models import Blob, Episode, Run, Screenshot, Site, Task
from taskgen.stages.import_ import episode as episode_module
from taskgen.stages.import_ import tasks_file
from taskgen.stages.import_.service import import_run_dir
from tests.rundirs import build_run, grade_inputs, png

pytestmark = pytest.mark.django_db


def _varied_run(tmp_path: Path) -> Path:
    """Episodes that fill every kind of column: text COPY must escape, JSON of every shape, a failed ending, a
    skipped file's note, no rows, no final screen."""
    run_dir = build_run(tmp_path, ["shop-a", "shop-b", "shop-c", "shop-d"], steps=3)
    odd = dict(grade_inputs(1), answer="tab\there\nnew line, back\\slash, \\N, quote \" and ünïcødé ☃",
               finished="error", end_reason="step limit", error="the browser crashed\tat step 2",
               seen="one page", nested={"deep": [[1, 2.5, None, True, {"k": "v\\n"}]], "": "empty key"})
    (run_dir / "shop-b/grade_inputs.json").write_text(json.dumps(odd).replace('"v\\\\n"', "NaN"))
    (run_dir / "shop-c/screenshots/step_1.png").write_bytes(b"not a png")  # its skip note goes in `extra`
    for name in ("rows/rows.jsonl", "rows/episode.json", "rows/step_0.png", "final.png"):
        (run_dir / "shop-d" / name).unlink()
    (run_dir / "shop-d/screenshots/step_2.png").write_bytes(png((1, 2, 3), size=(7, 900)))
    return run_dir


def _rows() -> dict:
    """Every row the import wrote, by what it is rather than by its id (the two paths number rows apart)."""
    skip = {"id", "created_at", "run_id", "task_id"}
    episodes = {e.task.task_id: {k: v for k, v in vars(e).items() if k not in skip and not k.startswith("_")}
                for e in Episode.objects.select_related("task")}
    for values in episodes.values():
        values["site_id"] = Episode.site.field.related_model.objects.get(pk=values["site_id"]).slug
    return {
        "episodes": episodes,
        "episode_order": list(Episode.objects.order_by("id").values_list("task__task_id", flat=True)),
        "screenshots": sorted(Screenshot.objects.values_list("episode__task__task_id", "kind", "step", "name",
                                                             "blob__sha256")),
        "blobs": sorted(Blob.objects.values_list("sha256", "size", "content_type", "width", "height",
                                                 "has_thumbnail")),
        "created_at_set": all(Episode.objects.values_list("created_at", flat=True))
        and all(Blob.objects.values_list("created_at", flat=True)),
    }


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's; SQLite has the ORM path only")
def test_copy_and_the_orm_write_the_same_rows(tmp_path, monkeypatch):
    run_dir = _varied_run(tmp_path)
    with monkeypatch.context() as orm_only:
        orm_only.setattr(episode_module, "by_copy", lambda: False)
        orm_only.setattr(blobs, "by_copy", lambda: False)
        orm_only.setattr(tasks_file, "by_copy", lambda: False)
        by_orm = import_run_dir(run_dir=run_dir)
    orm_rows, orm_tasks = _rows(), _task_rows()
    Run.objects.all().delete()
    Task.objects.all().delete()
    Blob.objects.all().delete()  # the files stay: the second import finds them and writes only rows
    by_copy = import_run_dir(run_dir=run_dir)
    assert by_copy.as_dict() | {"run_id": 0} == by_orm.as_dict() | {"run_id": 0}
    assert _task_rows() == orm_tasks and len(orm_tasks) == 4
    assert orm_tasks["shop-a"]["verifier_sql_null"]  # no verifier in the line: SQL NULL both ways, not JSON null
    assert _rows() == orm_rows
    assert orm_rows["created_at_set"] and len(orm_rows["episodes"]) == 4
    failed = orm_rows["episodes"]["shop-b"]
    assert (failed["status"], failed["answer"][:8], failed["extra"]["nested"]["deep"][0][4]) == ("failed", "tab\there",
                                                                                                 {"k": None})
    assert "import_skipped" in orm_rows["episodes"]["shop-c"]["extra"]


def _task_rows() -> dict:
    """Every task row by its task id; a nullable JSON column as SQL NULL or not (Python reads both NULL and the
    JSON `null` as None)."""
    skip = {"id", "created_at", "site_id"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_id, verifier IS NULL FROM taskgen_task")
        sql_null = dict(cursor.fetchall())
    return {t.task_id: {k: v for k, v in vars(t).items() if k not in skip and not k.startswith("_")} | {
        "site": t.site.slug, "created_at_set": bool(t.created_at), "verifier_sql_null": sql_null[t.task_id]}
        for t in Task.objects.select_related("site")}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's; SQLite has the ORM path only")
def test_new_tasks_one_another_import_made_meanwhile_leave_it_as_it_was():
    site = Site.objects.create(slug="shop", name="shop")
    Task.objects.create(task_id="shop-a", site=site, instruction="theirs")
    wanted = [{"task_id": t, "site_id": site.pk, "instruction": "ours", "raw": {"task_id": t}}
              for t in ("shop-a", "shop-b")]
    assert tasks_file._tasks_create(wanted) == 1  # COPY meets shop-a's row and is rolled back; the ORM skips it
    assert dict(Task.objects.values_list("task_id", "instruction")) == {"shop-a": "theirs", "shop-b": "ours"}
    assert Task.objects.get(task_id="shop-b").raw == {"task_id": "shop-b"}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="COPY is PostgreSQL's; SQLite has the ORM path only")
def test_a_row_copy_refuses_is_that_episodes_refusal_alone(tmp_path):
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"])
    (run_dir / "shop-b/grade_inputs.json").write_text('{"answer": "x", "score": 1e400}')  # Infinity: not JSON to it
    summary = import_run_dir(run_dir=run_dir)
    assert summary.episodes_added == 1
    assert list(Episode.objects.values_list("task__task_id", flat=True)) == ["shop-a"]
    assert [s.path for s in summary.skipped] == ["run/shop-b"]
    assert "the database refused the episode (DataError" in summary.skipped[0].reason
