"""Bad input in a run dir: each case is skipped with a line naming the file and the reason; the rest imports."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from taskgen.models import Episode, Screenshot, Task
from taskgen.stages.import_.service import import_run_dir
from tests.rundirs import build_run, png, task_line, write_episode, write_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_dir(tmp_path):
    """Two good episodes: each test spoils `shop-b` (or adds something bad) and checks `shop-a` still lands."""
    return build_run(tmp_path, ["shop-a", "shop-b"])


def _skips(summary) -> dict[str, str]:
    return {skip.path: skip.reason for skip in summary.skipped}


def _imported() -> list[str]:
    return sorted(Episode.objects.values_list("task__task_id", flat=True))


@pytest.mark.parametrize("content, reason", [
    ('{"actions": [{"click": {"index": 3}}], "answer": "hal', "truncated JSON"),
    ('{"actions": [}', "invalid JSON"),
    ("[1, 2]", "holds JSON list, not an object"),
    ('{"actions": "click"}', "`actions` is str, not a list"),
    (b"\xff\xfe{}", "not UTF-8 text"),
])
def test_a_bad_grade_inputs_skips_the_episode_whole(run_dir, content, reason):
    path = run_dir / "shop-b/grade_inputs.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    summary = import_run_dir(run_dir=run_dir)
    assert reason in _skips(summary)["run/shop-b/grade_inputs.json"]
    assert _imported() == ["shop-a"] and summary.episodes_added == 1
    assert not Screenshot.objects.filter(episode__task__task_id="shop-b").exists()  # nothing half-imported


def test_a_missing_grade_inputs_skips_the_episode(run_dir):
    (run_dir / "shop-b/grade_inputs.json").unlink()
    summary = import_run_dir(run_dir=run_dir)
    assert _skips(summary) == {"run/shop-b/grade_inputs.json": "episode not imported: grade_inputs.json: missing"}
    assert _imported() == ["shop-a"]


@pytest.mark.parametrize("data", [b"not an image at all", png()[:60], b"<svg xmlns='http://www.w3.org/2000/svg'/>"])
def test_a_screenshot_that_is_not_an_image_is_skipped(run_dir, data):
    (run_dir / "shop-b/screenshots/step_1.png").write_bytes(data)
    summary = import_run_dir(run_dir=run_dir)
    assert "not a readable image" in _skips(summary)["run/shop-b/screenshots/step_1.png"]
    episode = Episode.objects.get(task__task_id="shop-b")
    assert list(episode.screenshots.filter(kind="step").values_list("name", flat=True)) == ["step_0.png", "step_2.png"]
    assert episode.extra["import_skipped"][0].startswith("run/shop-b/screenshots/step_1.png: not a readable image")


@pytest.mark.parametrize("task_id", ["../x", "/etc/passwd", "a/b", "a\\b", "nul\x00byte", "..", ".hidden", ""])
def test_a_task_id_that_is_not_a_plain_name_is_skipped(run_dir, task_id):
    write_tasks(run_dir / "tasks.jsonl", [task_line("shop-a"), task_line("shop-b"), task_line(task_id)])
    summary = import_run_dir(run_dir=run_dir)
    assert "is not a plain name" in _skips(summary)["run/tasks.jsonl:3"]
    assert sorted(Task.objects.values_list("task_id", flat=True)) == ["shop-a", "shop-b"]
    assert _imported() == ["shop-a", "shop-b"]


def test_a_results_line_or_judge_file_with_a_bad_task_id_is_skipped(run_dir):
    (run_dir / "results.jsonl").write_text('{"task_id": "../x", "ok": true}\n{"task_id": "shop-a", "ok": true}\n')
    judge_dir = run_dir.parent / "run_judge"
    judge_dir.mkdir()
    (judge_dir / "..evil.json").write_text(json.dumps({"response": "{}", "model": "m"}))
    summary = import_run_dir(run_dir=run_dir)
    assert "not a plain name" in _skips(summary)["run/results.jsonl:1"]
    assert "not a plain name" in _skips(summary)["run_judge/..evil.json"]
    assert summary.verifier_results == 1


def test_a_folder_without_a_task_line_is_skipped(run_dir):
    write_episode(run_dir, "stray-task")
    summary = import_run_dir(run_dir=run_dir)
    assert _skips(summary) == {"run/stray-task": "no line for this task id in the tasks file"}


def test_a_symlink_leading_out_of_the_run_dir_is_skipped(run_dir, tmp_path):
    secret = tmp_path / "outside.png"
    secret.write_bytes(png())
    (run_dir / "shop-b/final.png").unlink()
    os.symlink(secret, run_dir / "shop-b/final.png")
    outside_episode = write_episode(tmp_path / "elsewhere", "shop-c")
    os.symlink(outside_episode, run_dir / "shop-c")
    write_tasks(run_dir / "tasks.jsonl", [task_line(t) for t in ("shop-a", "shop-b", "shop-c")])
    summary = import_run_dir(run_dir=run_dir)
    skips = _skips(summary)
    assert "symlink leads out of run/" in skips["run/shop-b/final.png"]
    assert "symlink leads out of run/" in skips["run/shop-c"]
    assert _imported() == ["shop-a", "shop-b"]
    assert not Screenshot.objects.filter(episode__task__task_id="shop-b", kind="final").exists()


def test_a_subfolder_symlinked_out_of_the_run_dir_is_skipped_also_below_a_followed_symlink(run_dir, tmp_path):
    outside = write_episode(tmp_path / "elsewhere", "shop-x")
    shutil.rmtree(run_dir / "shop-b/screenshots")
    os.symlink(outside / "screenshots", run_dir / "shop-b/screenshots")
    os.rename(run_dir / "shop-b", run_dir / ".kept-b")
    os.symlink(run_dir / ".kept-b", run_dir / "shop-b")  # the episode folder: a symlink inside the run dir
    skips = _skips(import_run_dir(run_dir=run_dir))
    assert list(skips) == ["run/shop-b/screenshots/"]
    assert "symlink leads out of run/" in skips["run/shop-b/screenshots/"]
    assert _imported() == ["shop-a", "shop-b"]
    assert Screenshot.objects.filter(episode__task__task_id="shop-b").count() == 2  # final.png and rows/step_0.png


def test_a_symlink_inside_the_run_dir_is_followed(run_dir):
    (run_dir / "shop-b/final.png").unlink()
    os.symlink(run_dir / "shop-a/final.png", run_dir / "shop-b/final.png")
    assert import_run_dir(run_dir=run_dir).skipped == []


def test_files_over_the_size_limits_are_skipped(run_dir, settings):
    settings.BLOB_MAX_BYTES = 2048
    settings.JSON_MAX_BYTES = 4096
    (run_dir / "shop-b/screenshots/step_0.png").write_bytes(png(size=(400, 400)) + b"\0" * 3000)
    (run_dir / "shop-a/grade_inputs.json").write_text(json.dumps({"answer": "x" * 5000}))
    summary = import_run_dir(run_dir=run_dir)
    skips = _skips(summary)
    assert "over the 2,048-byte limit" in skips["run/shop-b/screenshots/step_0.png"]
    assert "over the 4,096-byte limit" in skips["run/shop-a/grade_inputs.json"]
    assert _imported() == ["shop-b"]


def test_bad_task_lines_are_skipped_and_good_ones_kept(run_dir):
    lines = [json.dumps(task_line("shop-a")), "{not json", json.dumps(task_line("shop-b", kind="browse")),
             json.dumps({"task_id": "no-site", "instruction": "x"}), json.dumps(task_line("shop-a"))]
    (run_dir / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    summary = import_run_dir(run_dir=run_dir)
    skips = _skips(summary)
    assert "invalid JSON" in skips["run/tasks.jsonl:2"]
    assert "not info or action" in skips["run/tasks.jsonl:3"]
    assert "task no-site: no site" in skips["run/tasks.jsonl:4"]
    assert "repeats line 1" in skips["run/tasks.jsonl:5"]
    assert _imported() == ["shop-a"]  # shop-b's folder has no good task line
    assert skips["run/shop-b"] == "no line for this task id in the tasks file"


def test_nul_characters_in_agent_text_are_stored_without_them(run_dir):
    (run_dir / "shop-b/grade_inputs.json").write_text(json.dumps({"answer": "a\u0000b", "seen": ["x\u0000"]}))
    import_run_dir(run_dir=run_dir)
    episode = Episode.objects.get(task__task_id="shop-b")
    assert (episode.answer, episode.screen_text) == ("a\ufffdb", ["x\ufffd"])


def test_bad_rows_files_are_skipped_but_the_episode_kept(run_dir):
    (run_dir / "shop-b/rows/rows.jsonl").write_text('{"step": 0}\nnot json\n')
    (run_dir / "shop-b/rows/episode.json").write_text('{"task_id": ')
    summary = import_run_dir(run_dir=run_dir)
    skips = _skips(summary)
    assert "line 2 is not JSON" in skips["run/shop-b/rows/rows.jsonl"]
    assert "truncated JSON" in skips["run/shop-b/rows/episode.json"]
    episode = Episode.objects.get(task__task_id="shop-b")
    assert (episode.has_rows, episode.rows_jsonl, episode.episode_json) == (False, "", "")


def test_a_special_file_is_not_read(run_dir):
    (run_dir / "shop-b/final.png").unlink()
    os.mkfifo(run_dir / "shop-b/final.png")  # reading a FIFO would wait forever
    summary = import_run_dir(run_dir=run_dir)
    assert _skips(summary)["run/shop-b/final.png"] == "not a regular file"


def test_a_symlink_loop_is_skipped(run_dir):
    (run_dir / "shop-b/final.png").unlink()
    os.symlink(run_dir / "shop-b/loop-b", run_dir / "shop-b/loop-a")
    os.symlink(run_dir / "shop-b/loop-a", run_dir / "shop-b/loop-b")
    os.symlink(run_dir / "shop-b/loop-a", run_dir / "shop-b/final.png")
    summary = import_run_dir(run_dir=run_dir)
    assert "cannot be resolved" in _skips(summary)["run/shop-b/final.png"]
    assert _imported() == ["shop-a", "shop-b"]


def test_a_symlink_to_nothing_is_named_but_a_missing_optional_file_is_not(run_dir):
    (run_dir / "shop-b/final.png").unlink()
    os.symlink(run_dir / "shop-b/nothing.png", run_dir / "shop-b/final.png")
    (run_dir / "shop-a/final.png").unlink()
    summary = import_run_dir(run_dir=run_dir)
    assert _skips(summary) == {"run/shop-b/final.png": "cannot be read (No such file or directory)"}
    assert _imported() == ["shop-a", "shop-b"]


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"answer": ' + "9" * 5000 + "}"])
def test_json_too_deep_or_a_number_too_long_is_skipped(run_dir, content):
    (run_dir / "shop-b/grade_inputs.json").write_text(content)
    summary = import_run_dir(run_dir=run_dir)
    assert "invalid JSON" in _skips(summary)["run/shop-b/grade_inputs.json"]


def test_nan_in_agent_data_is_stored_as_null(run_dir):
    (run_dir / "shop-b/grade_inputs.json").write_text('{"answer": "x", "log": [{"status": NaN, "t": Infinity}]}')
    import_run_dir(run_dir=run_dir)
    assert Episode.objects.get(task__task_id="shop-b").request_log == [{"status": None, "t": None}]


def test_unknown_files_among_screenshots_and_rows_are_named(run_dir):
    (run_dir / "shop-b/screenshots/step_1.jpg").write_bytes(png())
    (run_dir / "shop-b/rows/notes.txt").write_text("hi")
    summary = import_run_dir(run_dir=run_dir)
    assert _skips(summary) == {"run/shop-b/screenshots/step_1.jpg": "not named step_N.png",
                               "run/shop-b/rows/notes.txt": "not named step_N.png"}



def test_a_listed_screenshot_gets_the_same_checks_as_a_named_file(run_dir, tmp_path, settings):
    """Step screenshots are read from their folder's listing (no look-up by path first): a symlink out, a FIFO, a
    symlink inside and a file over the limit are each said as for final.png."""
    settings.BLOB_MAX_BYTES = 4096
    shots = run_dir / "shop-b/screenshots"
    (tmp_path / "outside.png").write_bytes(png())
    for name in ("step_0.png", "step_1.png", "step_2.png"):
        (shots / name).unlink()
    os.symlink(tmp_path / "outside.png", shots / "step_0.png")
    os.mkfifo(shots / "step_1.png")
    os.symlink(run_dir / "shop-a/final.png", shots / "step_2.png")
    (shots / "step_3.png").write_bytes(png() + b"\0" * 5000)
    summary = import_run_dir(run_dir=run_dir)
    skips = _skips(summary)
    assert "symlink leads out of run/" in skips["run/shop-b/screenshots/step_0.png"]
    assert skips["run/shop-b/screenshots/step_1.png"] == "not a regular file"
    assert "over the 4,096-byte limit" in skips["run/shop-b/screenshots/step_3.png"]
    assert "run/shop-b/screenshots/step_2.png" not in skips
    steps = Screenshot.objects.filter(episode__task__task_id="shop-b", kind="step").values_list("name", flat=True)
    assert list(steps) == ["step_2.png"]


def test_a_listed_file_replaced_by_a_fifo_after_the_listing_is_not_waited_on(tmp_path):
    from taskgen.stages.import_.files import FileSkipped, read_listed

    (tmp_path / "step_0.png").write_bytes(b"x")
    with os.scandir(tmp_path) as listing:
        entry = next(iter(listing))
    assert entry.is_file(follow_symlinks=False)  # the listing's word, kept by the entry
    os.unlink(tmp_path / "step_0.png")
    os.mkfifo(tmp_path / "step_0.png")  # a plain open would wait here for a writer, forever
    with pytest.raises(FileSkipped, match="not a regular file"):
        read_listed(entry, root=tmp_path, limit=100)
