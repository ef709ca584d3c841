"""Importing a reference run dir: every field lands, imports are idempotent, bad input is skipped with a reason."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import DataError

from taskgen.blobs import blob_path
from taskgen.models import (
    Blob,
    Episode,
    JudgeConfig,
    Judgment,
    PipelineRun,
    Run,
    Screenshot,
    Site,
    Task,
    VerifierResult,
)
from taskgen.stages.import_ import episode as episode_module
from taskgen.stages.import_ import service as importer
from taskgen.stages.import_.service import ImportFailed, import_run_dir
from tests.rundirs import build_run, grade_inputs, png, task_line, write_episode, write_tasks

pytestmark = pytest.mark.django_db

OM2W = Path(django_settings.BASE_DIR).parent / "shared" / "data" / "online-mind2web-abp"


def _judge_file(run_dir: Path, task_id: str, response: str, label: int = 1, model: str = "gemini-test") -> None:
    judge_dir = run_dir.parent / f"{run_dir.name}_judge"
    judge_dir.mkdir(exist_ok=True)
    record = {"task_id": task_id, "predicted_label": label, "verdict": True, "response": response, "model": model}
    (judge_dir / f"{task_id}.json").write_text(json.dumps(record))


@pytest.fixture
def full_run(tmp_path) -> Path:
    """Two episodes with 11 steps (step_10 must sort after step_2), results files and a judge folder."""
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"], steps=11)
    (run_dir / "results.jsonl").write_text('{"task_id": "shop-a", "ok": false}\n{"task_id": "shop-b", "ok": false}\n')
    (run_dir / "results_regraded.jsonl").write_text('{"task_id": "shop-a", "ok": true}\n')
    parts = [{"part": "find the mug", "done": True, "evidence": "search for mug"},
             {"part": "report price", "done": False, "evidence": "no answer"}]
    _judge_file(run_dir, "shop-a", "```json\n" + json.dumps({"parts": parts, "verdict": "SUCCESS"}) + "\n```")
    _judge_file(run_dir, "shop-b", "I think it worked.", label=0)
    return run_dir


def test_every_field_of_a_run_dir_lands(full_run):
    summary = import_run_dir(run_dir=full_run)
    assert (summary.episodes_added, summary.screenshots, summary.skipped) == (2, 2 * 13, [])
    assert (summary.verifier_results, summary.judgments, summary.tasks_added) == (1, 2, 2)
    run = summary.run
    assert (run.name, run.source_dir, run.tasks_file) == ("run", str(full_run), str(full_run / "tasks.jsonl"))

    task = Task.objects.get(task_id="shop-a")
    assert (task.site.slug, task.task_kind, task.source) == ("shop", "info", "proposed")
    assert task.start_path == "/sites/shop/"
    assert task.raw == task_line("shop-a") and task.instruction == "Find the price of shop-a"

    episode = Episode.objects.get(run=run, task=task)
    expected = grade_inputs(0)
    assert episode.actions == expected["actions"] and episode.answer == expected["answer"]
    assert episode.request_log == expected["log"] and episode.data_changes == expected["changes"]
    assert episode.screen_text == expected["seen"] and episode.extra == {"harness": {"version": 3}}
    assert (episode.site.slug, episode.task_kind, episode.task_order, episode.steps) == ("shop", "info", 1, 4)
    assert episode.rows_jsonl == (full_run / "shop-a/rows/rows.jsonl").read_text()
    assert episode.episode_json == (full_run / "shop-a/rows/episode.json").read_text()  # exact text, spaces kept
    assert (episode.row_count, episode.has_rows, len(episode.content_hash)) == (2, True, 64)
    assert Episode.objects.get(task__task_id="shop-b").task_order == 2

    steps = list(episode.screenshots.filter(kind="step").order_by("step").values_list("name", flat=True))
    assert steps == [f"step_{n}.png" for n in range(11)]
    final = episode.screenshots.get(kind="final")
    assert (final.name, final.step) == ("final.png", 11)
    row = episode.screenshots.get(kind="row")
    assert row.blob_id == final.blob_id  # the same bytes are one blob
    assert episode.screens == 12  # 11 steps and the final screen, not the row's copy: the run table sorts by it
    assert blob_path(final.blob).read_bytes() == (full_run / "shop-a/final.png").read_bytes()
    assert (final.blob.width, final.blob.height, final.blob.content_type) == (64, 40, "image/png")

    assert VerifierResult.objects.get(episode=episode).ok is True  # results_regraded.jsonl wins
    assert VerifierResult.objects.get(episode=episode).source == "results_regraded.jsonl"
    assert not VerifierResult.objects.filter(episode__task__task_id="shop-b").exists()

    config = JudgeConfig.objects.get()
    assert (config.provider, config.model, config.prompt_version, config.image_policy) == (
        "gemini", "gemini-test", "reference", "reference")
    fenced = Judgment.objects.get(episode=episode)
    assert (fenced.verdict, fenced.inconsistent, fenced.source) == ("SUCCESS", True, "import")
    assert fenced.parts[1] == {"part": "report price", "done": False, "evidence": "no answer"}
    plain = Judgment.objects.get(episode__task__task_id="shop-b")  # the file's predicted_label is its verdict
    assert (plain.verdict, plain.raw_response, plain.response_disagrees) == ("NOT SUCCESS", "I think it worked.", False)


def _snapshot() -> dict:
    return {
        "episodes": list(Episode.objects.order_by("id").values_list("id", "content_hash", "answer")),
        "screenshots": list(Screenshot.objects.order_by("id").values_list("id", "blob_id")),
        "judgments": list(Judgment.objects.order_by("id").values_list("id", "updated_at")),
        "verifier": list(VerifierResult.objects.order_by("id").values_list("id", "ok")),
        "blobs": Blob.objects.count(), "tasks": list(Task.objects.values_list("id", "instruction")),
        "runs": list(Run.objects.values_list("id", "updated_at")),
    }


def test_importing_the_same_folder_twice_changes_nothing(full_run):
    import_run_dir(run_dir=full_run)
    before = _snapshot()
    again = import_run_dir(run_dir=full_run)
    assert (again.episodes_added, again.episodes_updated, again.episodes_unchanged) == (0, 0, 2)
    assert (again.screenshots, again.verifier_results, again.judgments, again.tasks_added) == (0, 0, 0, 0)
    assert (again.verifier_results_unchanged, again.judgments_unchanged) == (1, 2)
    assert _snapshot() == before


def test_a_grown_folder_adds_only_what_is_new(tmp_path):
    run_dir = build_run(tmp_path, ["shop-a"])
    import_run_dir(run_dir=run_dir)
    write_episode(run_dir, "shop-c", n=7)
    write_tasks(run_dir / "tasks.jsonl", [task_line(t) for t in ("shop-a", "shop-c", "shop-d")])
    grown = import_run_dir(run_dir=run_dir)
    assert grown.tasks_without_episode == 1  # shop-d has a line but no folder yet
    assert (grown.episodes_added, grown.episodes_unchanged, grown.tasks_added) == (1, 1, 2)
    assert Episode.objects.count() == 2


def test_a_changed_episode_is_updated_in_place(tmp_path):
    run_dir = build_run(tmp_path, ["shop-a"], steps=3)
    first = Episode.objects.get(pk=import_run_dir(run_dir=run_dir).run.episodes.get().pk)
    (run_dir / "shop-a/screenshots/step_2.png").unlink()
    changed = dict(grade_inputs(0), answer="now 9 EUR")
    del changed["log"]  # a field that is gone must not keep its old value
    (run_dir / "shop-a/grade_inputs.json").write_text(json.dumps(changed))
    summary = import_run_dir(run_dir=run_dir)
    assert (summary.episodes_updated, summary.episodes_added) == (1, 0)
    episode = Episode.objects.get()
    assert (episode.pk, episode.answer, episode.request_log) == (first.pk, "now 9 EUR", [])
    assert episode.content_hash != first.content_hash
    assert episode.screenshots.filter(kind="step").count() == 2 and episode.screens == 3


def test_tasks_file_is_found_beside_the_run_dir_or_given(tmp_path):
    run_dir = build_run(tmp_path / "beside", ["shop-a"], tasks_beside=True)
    assert import_run_dir(run_dir=run_dir, name="beside").episodes_added == 1
    other = build_run(tmp_path / "given", ["shop-b"])
    given = write_tasks(tmp_path / "mine.jsonl", [task_line("shop-b", site="mail")])
    summary = import_run_dir(run_dir=other, tasks_file=given, name="given")
    assert summary.run.tasks_file == str(given) and Site.objects.filter(slug="mail").exists()


def test_a_run_dir_without_tasks_file_fails_clearly(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(ImportFailed, match="no tasks file"):
        import_run_dir(run_dir=tmp_path / "run")
    with pytest.raises(ImportFailed, match="not a folder"):
        import_run_dir(run_dir=tmp_path / "missing")


def test_the_same_name_from_another_folder_is_refused(tmp_path):
    import_run_dir(run_dir=build_run(tmp_path / "one", ["shop-a"]))
    with pytest.raises(ImportFailed, match="pass --name"):
        import_run_dir(run_dir=build_run(tmp_path / "two", ["shop-b"]))


def test_workers_in_other_processes_import_the_same(tmp_path, settings, monkeypatch):
    settings.IMPORT_WORKERS = 2
    monkeypatch.setattr(importer, "PARALLEL_FROM", 1)
    run_dir = build_run(tmp_path, [f"shop-{n}" for n in range(6)])
    (run_dir / "shop-3/screenshots/step_1.png").write_text("not a png")
    summary = import_run_dir(run_dir=run_dir)
    assert (summary.episodes_added, summary.screenshots) == (6, 6 * 5 - 1)
    assert [s.path for s in summary.skipped] == ["run/shop-3/screenshots/step_1.png"]
    assert all(blob_path(b).exists() for b in Blob.objects.all())
    assert import_run_dir(run_dir=run_dir).episodes_unchanged == 6


def test_the_workers_prepare_episodes_while_the_tasks_are_saved(tmp_path, settings, monkeypatch):
    """The workers start before the tasks file's rows are written (the importing process saves them meanwhile):
    the tasks' save here waits until a worker has stored a screenshot, which it could not if they started after."""
    import time

    settings.IMPORT_WORKERS = 2
    monkeypatch.setattr(importer, "PARALLEL_FROM", 1)
    run_dir = build_run(tmp_path, [f"shop-{n}" for n in range(6)])
    store, real_save, waited = Path(django_settings.MEDIA_ROOT) / "blobs", importer.tasks_save, []

    def save_once_a_worker_stored_a_blob(**kwargs):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(p.is_file() for p in store.rglob("*")):
            time.sleep(0.01)
        waited.append(any(p.is_file() for p in store.rglob("*")))
        return real_save(**kwargs)

    monkeypatch.setattr(importer, "tasks_save", save_once_a_worker_stored_a_blob)
    summary = import_run_dir(run_dir=run_dir)
    assert waited == [True]
    assert (summary.episodes_added, summary.tasks_added, summary.screenshots) == (6, 6, 30)


@pytest.mark.skipif(not OM2W.is_dir(), reason="the shared Online-Mind2Web data is not on this machine")
def test_the_real_online_mind2web_episodes_import():
    summary = import_run_dir(run_dir=OM2W / "run", tasks_file=OM2W / "tasks.jsonl", name="om2w")
    assert (summary.episodes_added, summary.screenshots, summary.tasks_added) == (300, 0, 300)
    assert [s.reason for s in summary.skipped] == [
        "task om2w-adoptapet-com-b69eb4de repeats line 215; the first is kept"]
    assert Site.objects.count() == 116
    episode = Episode.objects.get(task__task_id="om2w-drugs-com-e4e19e04")
    source = json.loads((OM2W / "run/om2w-drugs-com-e4e19e04/grade_inputs.json").read_text())
    assert (episode.answer, episode.actions, episode.screen_text) == (source["answer"], source["actions"],
                                                                      source["seen"])
    assert episode.steps == len(source["actions"])  # one step per action, the closing done included
    assert episode.site.base_url == "https://www.drugs.com"
    assert import_run_dir(run_dir=OM2W / "run", tasks_file=OM2W / "tasks.jsonl", name="om2w").episodes_unchanged == 300


def test_the_command_prints_a_summary_with_each_skip(full_run, capsys):
    (full_run / "shop-b/final.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    call_command("taskgen", "import", str(full_run), "--name", "cli-run")
    out = capsys.readouterr().out
    assert "run 'cli-run'" in out and "episodes: 2 added, 0 updated, 0 unchanged" in out
    assert "skipped: 1" in out and "run/shop-b/final.png: not a readable image" in out


def test_the_command_exits_non_zero_only_when_nothing_was_imported(tmp_path, capsys):
    run_dir = build_run(tmp_path, ["shop-a"])
    (run_dir / "shop-a/grade_inputs.json").write_text("{")
    with pytest.raises(SystemExit) as exit_info:
        call_command("taskgen", "import", str(run_dir))
    assert exit_info.value.code == 1
    assert "nothing could be imported" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        call_command("taskgen", "import", str(tmp_path / "nowhere"))


@pytest.mark.skipif(not OM2W.is_dir(), reason="the shared Online-Mind2Web data is not on this machine")
def test_demo_data_imports_online_mind2web_once(capsys):
    call_command("taskgen", "demo-data")
    said = capsys.readouterr().out
    assert "loaded 300 Online-Mind2Web episodes" in said
    assert "none of its episodes has training rows" in said  # so an empty export surprises nobody
    call_command("taskgen", "demo-data")
    assert "already imported" in capsys.readouterr().out
    assert Run.objects.get().name == "online-mind2web-abp"
    # a run of the import stage, as any import: it shows on the Pipeline page with its summary
    imported = PipelineRun.objects.get(stage="import")
    assert imported.status == "done" and imported.run.name == "online-mind2web-abp"
    assert imported.result["episodes_added"] == 300


def test_a_database_refusal_rolls_back_only_that_episode(tmp_path, monkeypatch):
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"])
    real_write = episode_module.screenshots_write

    def refuse_shop_b(rows):  # a statement holding any of shop-b's rows (they go in batches)
        if Episode.objects.filter(pk__in={row["episode_id"] for row in rows}, task__task_id="shop-b").exists():
            raise DataError("value too long")
        return real_write(rows)

    monkeypatch.setattr(episode_module, "screenshots_write", refuse_shop_b)
    summary = import_run_dir(run_dir=run_dir)
    assert summary.episodes_added == 1
    assert list(Episode.objects.values_list("task__task_id", flat=True)) == ["shop-a"]  # no half of shop-b
    assert summary.skipped[0].path == "run/shop-b" and "database refused" in summary.skipped[0].reason


def test_blob_bytes_are_stored_once(tmp_path, settings):
    settings.JUDGE_IMAGE_COPIES = ("small",)
    run_dir = build_run(tmp_path, ["shop-a", "shop-b"], steps=1)
    (run_dir / "shop-b/screenshots/step_0.png").write_bytes(png((0, 100, 0)))
    (run_dir / "shop-a/screenshots/step_0.png").write_bytes(png((0, 100, 0)))
    import_run_dir(run_dir=run_dir)
    assert Blob.objects.count() == 2  # black (final and row images) and green
    files = list((Path(django_settings.MEDIA_ROOT) / "blobs").rglob("*"))
    blobs = [f for f in files if f.is_file() and "." not in f.name]
    copies = [f for f in files if f.is_file() and f.name.endswith(".small.webp")]
    assert len(blobs) == 2
    assert len(copies) == 2  # the judge's copy of each screen (black final, green step), once


def test_the_progress_bar_shows_on_a_terminal_only(tmp_path):
    import io

    from taskgen.stages.import_.command import _progress_bar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert _progress_bar(io.StringIO())[0] is None
    screen = Terminal()
    update, close = _progress_bar(screen)
    import_run_dir(run_dir=build_run(tmp_path, ["shop-a", "shop-b"]), progress=update)
    close()
    assert "2/2" in screen.getvalue()


def test_a_judge_files_predicted_label_is_its_verdict_and_a_disagreeing_response_is_flagged(tmp_path):
    from taskgen.stages.export.select import export_select

    run_dir = build_run(tmp_path, ["shop-a", "shop-b", "shop-c", "shop-d"])
    parts = [{"part": "find the mug", "done": True, "evidence": "request #0 searched for \"mug\""}]
    regraded = json.dumps({"parts": parts})  # a regraded file: the response keeps its parts but carries no verdict
    _judge_file(run_dir, "shop-a", regraded, label=1)
    _judge_file(run_dir, "shop-b", json.dumps({"parts": parts, "verdict": "SUCCESS"}), label=0)
    _judge_file(run_dir, "shop-c", "(judge error ReadTimeout: ...)", label=0)
    _judge_file(run_dir, "shop-d", regraded, label=7)
    summary = import_run_dir(run_dir=run_dir)
    judged = {j.episode.task.task_id: j for j in Judgment.objects.select_related("episode__task")}
    assert (judged["shop-a"].verdict, judged["shop-a"].parts, judged["shop-a"].response_disagrees) == (
        "SUCCESS", parts, False)
    assert (judged["shop-b"].verdict, judged["shop-b"].response_disagrees) == ("NOT SUCCESS", True)  # kept, flagged
    assert judged["shop-c"].verdict == "NOT SUCCESS" and "shop-d" not in judged
    assert [s.reason for s in summary.skipped] == ["predicted_label is '7', not 0 or 1"]
    # the reference's `rows` takes every predicted_label 1 with rows: so does the app's judge export
    selection = export_select(run=summary.run, judge_config=judged["shop-a"].config)
    assert [c.task_id for c in selection.picked] == ["shop-a"]
    # a changed predicted_label with the same response is a change
    _judge_file(run_dir, "shop-a", regraded, label=0)
    assert import_run_dir(run_dir=run_dir).judgments == 1
    assert Judgment.objects.get(episode__task__task_id="shop-a").verdict == "NOT SUCCESS"
