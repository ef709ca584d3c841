"""The rows export: selection order and budget as the reference, the three sources, byte-compatible output."""
from __future__ import annotations

import argparse
import filecmp
import importlib.util
import io
import json
import os
import sys
import tarfile
import types
from pathlib import Path

import pytest

from taskgen.models import Export, FinalLabel, JudgeConfig, Judgment, PipelineRun
from taskgen.stages.export.output import export_stream_targz
from taskgen.stages.export.select import ExportError, export_budget_check, export_select, report_sites
from taskgen.stages.export.service import export_create
from tests.runfiles import HandTask, load_run_dir, write_run_dir

REFERENCE = Path(os.environ.get("TASKGEN_REFERENCE", "/work/shared/reference/taskgen.py"))

# Three sites with uneven counts, an empty rows.jsonl judged a success, episodes without rows, judged failures
# and an unjudged task; sorted site names are alpha < beta < gamma, file order interleaves them differently.
HAND_TASKS = [
    HandTask("gamma", 1, rows=3), HandTask("alpha", 1, rows=2), HandTask("alpha", 2, rows=0),
    HandTask("beta", 1, rows=4, judged=False), HandTask("alpha", 3, rows=5), HandTask("gamma", 2, rows=None),
    HandTask("beta", 2, rows=1), HandTask("alpha", 4, rows=2), HandTask("gamma", 3, rows=6, judged=None),
    HandTask("alpha", 5, rows=3), HandTask("beta", 3, rows=2), HandTask("gamma", 4, rows=1),
]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Users made for these tests log in by session; hashing their passwords slowly buys nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def hand_run(settings, tmp_path):
    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "hand", HAND_TASKS)
    run = load_run_dir(run_dir, tasks_file)
    return run, run_dir, tasks_file


def reference_rows(monkeypatch, tmp_path, run_dir: Path, tasks_file: Path, out: Path, budget: int) -> None:
    """Run the reference's own cmd_rows (the spec) with its repo-path import stubbed."""
    if not REFERENCE.exists():
        pytest.skip(f"the reference script is not at {REFERENCE} (set TASKGEN_REFERENCE)")
    helpers, paths = types.ModuleType("helpers"), types.ModuleType("helpers.paths")
    paths.REPO_ROOT = tmp_path
    monkeypatch.setitem(sys.modules, "helpers", helpers)
    monkeypatch.setitem(sys.modules, "helpers.paths", paths)
    spec = importlib.util.spec_from_file_location("reference_taskgen", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.cmd_rows(argparse.Namespace(run=str(run_dir), out=str(out), tasks=str(tasks_file), budget=budget))


def picked_ids(selection) -> list[str]:
    return [c.task_id for c in selection.picked]


@pytest.mark.django_db
def test_selection_is_round_robin_over_sorted_sites_in_file_order(hand_run):
    run, *_ = hand_run
    selection = export_select(run=run, judge_config=JudgeConfig.objects.get(), budget=1000)
    # rounds over all tasks: a1 b1 g1 | a2 b2 g2 | a3 b3 g3 | a4 g4 | a5, less beta-1 (judged no), alpha-2 (empty),
    # gamma-2 (no rows) and gamma-3 (not judged)
    assert picked_ids(selection) == ["tg-alpha-1", "tg-gamma-1", "tg-beta-2", "tg-alpha-3", "tg-beta-3",
                                     "tg-alpha-4", "tg-gamma-4", "tg-alpha-5"]
    assert selection.candidates == 9  # the empty alpha-2 is a candidate, as in the reference


@pytest.mark.django_db
def test_budget_hit_mid_site_lets_the_last_episode_pass_it(hand_run):
    run, *_ = hand_run
    selection = export_select(run=run, judge_config=JudgeConfig.objects.get(), budget=8)
    # 2 + 3 + 1 = 6 < 8, so alpha-3 (5 rows) is still taken, passing the budget (11); later ones are skipped but
    # still counted as candidates.
    assert picked_ids(selection) == ["tg-alpha-1", "tg-gamma-1", "tg-beta-2", "tg-alpha-3"]
    assert selection.rows == 11 and selection.candidates == 9


@pytest.mark.django_db
@pytest.mark.parametrize(("budget", "workers"), [(1, 1), (8, 1), (12, 3), (13, 2), (1000, 1), (1000, 3)])
def test_folder_and_report_match_the_reference_byte_for_byte(hand_run, monkeypatch, tmp_path, settings, budget,
                                                             workers):
    settings.EXPORT_WORKERS = workers  # one writer writes on the calling thread; more use a thread pool
    run, run_dir, tasks_file = hand_run
    ref_out = tmp_path / "reference-out"
    reference_rows(monkeypatch, tmp_path, run_dir, tasks_file, ref_out, budget)
    ours = Path(settings.DATA_ROOT) / "ours"
    export_create(run=run, source="judge", judge_config=JudgeConfig.objects.get(), budget=budget, out_dir=ours)
    assert (ours / "_report.json").read_bytes() == (ref_out / "_report.json").read_bytes()
    theirs = sorted(p.name for p in ref_out.iterdir())
    assert sorted(p.name for p in ours.iterdir() if p.name != "_manifest.json") == theirs
    for folder in (p for p in ref_out.iterdir() if p.is_dir()):
        compare = filecmp.dircmp(folder, ours / folder.name)
        assert not compare.left_only and not compare.right_only
        assert filecmp.cmpfiles(folder, ours / folder.name, compare.common_files, shallow=False)[1:] == ([], [])


@pytest.mark.django_db
def test_human_source_uses_final_labels_only(hand_run):
    run, *_ = hand_run
    for task_id, verdict in [("tg-beta-1", "SUCCESS"), ("tg-alpha-1", "NOT SUCCESS"), ("tg-gamma-3", "SUCCESS"),
                             ("tg-gamma-2", "SUCCESS")]:
        FinalLabel.objects.create(episode=run.episodes.get(task__task_id=task_id), verdict=verdict)
    selection = export_select(run=run, source="human", budget=1000)
    assert picked_ids(selection) == ["tg-beta-1", "tg-gamma-3"]  # gamma-2 has no rows: never exported


@pytest.mark.django_db
def test_human_over_judge_prefers_the_human_where_both_exist(hand_run):
    run, *_ = hand_run
    FinalLabel.objects.create(episode=run.episodes.get(task__task_id="tg-beta-1"), verdict="SUCCESS")
    FinalLabel.objects.create(episode=run.episodes.get(task__task_id="tg-alpha-3"), verdict="UNSURE")
    FinalLabel.objects.create(episode=run.episodes.get(task__task_id="tg-alpha-4"), verdict="NOT SUCCESS")
    selection = export_select(run=run, source="human-over-judge", judge_config=JudgeConfig.objects.get(),
                              budget=1000)
    assert picked_ids(selection) == ["tg-alpha-1", "tg-beta-1", "tg-gamma-1", "tg-beta-2", "tg-beta-3",
                                     "tg-gamma-4", "tg-alpha-5"]


@pytest.mark.django_db
def test_adjudicated_not_success_is_never_exported_even_as_a_judge_success(hand_run):
    run, *_ = hand_run
    FinalLabel.objects.create(episode=run.episodes.get(task__task_id="tg-alpha-1"), verdict="NOT SUCCESS",
                              adjudicated=True)
    selection = export_select(run=run, judge_config=JudgeConfig.objects.get(), budget=1000)
    assert "tg-alpha-1" not in picked_ids(selection)
    assert selection.candidates == 8


@pytest.mark.django_db
def test_judge_source_uses_only_the_chosen_config(hand_run):
    run, *_ = hand_run
    other = JudgeConfig.objects.create(provider="rules", model="rules-v1", prompt_version="v1")
    Judgment.objects.create(episode=run.episodes.get(task__task_id="tg-beta-1"), config=other, verdict="SUCCESS")
    assert picked_ids(export_select(run=run, judge_config=other, budget=1000)) == ["tg-beta-1"]


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "1.5", "", True, 0])
def test_budget_must_be_a_positive_whole_number(bad):
    with pytest.raises(ExportError, match="positive whole number"):
        export_budget_check(bad)


def test_sites_figure_is_computed_from_task_ids_like_the_reference():
    assert report_sites(["tg-alpha-1", "tg-alpha-2", "tg-beta-shop-9", "plain"]) == 3


@pytest.mark.django_db
def test_same_parameters_on_unchanged_data_give_the_same_manifest(hand_run, settings):
    run, *_ = hand_run
    config = JudgeConfig.objects.get()
    first = export_create(run=run, source="judge", judge_config=config, budget=9, out_dir="a")
    second = export_create(run=run, source="judge", judge_config=config, budget=9)
    assert first.manifest_sha256 == second.manifest_sha256
    assert (Path(settings.DATA_ROOT) / "a" / "_manifest.json").read_bytes() == json.dumps(
        first.manifest, indent=1, sort_keys=True, ensure_ascii=False).encode()
    FinalLabel.objects.create(episode=run.episodes.get(task__task_id="tg-alpha-1"), verdict="NOT SUCCESS",
                              adjudicated=True)
    assert export_create(run=run, source="judge", judge_config=config, budget=9).manifest_sha256 != \
        first.manifest_sha256


@pytest.mark.django_db
def test_an_export_folder_outside_the_data_root_is_refused_and_nothing_is_written(hand_run, tmp_path):
    run, *_ = hand_run
    outside = tmp_path / "elsewhere"
    with pytest.raises(ExportError, match="outside the data root"):
        export_create(run=run, source="judge", judge_config=JudgeConfig.objects.get(), out_dir=outside)
    assert not outside.exists() and Export.objects.count() == 0


@pytest.mark.django_db
def test_a_symlink_out_of_the_data_root_is_refused(hand_run, tmp_path, settings):
    run, *_ = hand_run
    (tmp_path / "target").mkdir()
    (Path(settings.DATA_ROOT) / "link").symlink_to(tmp_path / "target")
    with pytest.raises(ExportError, match="outside the data root"):
        export_create(run=run, source="judge", judge_config=JudgeConfig.objects.get(), out_dir="link/out")
    assert not (tmp_path / "target" / "out").exists()


@pytest.mark.django_db
def test_a_folder_that_is_not_empty_is_refused_and_left_alone(hand_run, settings):
    run, *_ = hand_run
    used = Path(settings.DATA_ROOT) / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export_create(run=run, source="judge", judge_config=JudgeConfig.objects.get(), out_dir=used)
    assert [p.name for p in used.iterdir()] == ["keep.txt"] and Export.objects.count() == 0


@pytest.mark.django_db
def test_the_targz_holds_the_same_files_as_the_folder(hand_run, settings):
    run, *_ = hand_run
    export = export_create(run=run, source="judge", judge_config=JudgeConfig.objects.get(), budget=1000,
                           out_dir="folder")
    data = b"".join(export_stream_targz(export=export))
    folder = Path(settings.DATA_ROOT) / "folder"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers()}
    on_disk = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert members == on_disk


@pytest.mark.django_db
def test_the_rows_command_writes_what_the_reference_writes(hand_run, monkeypatch, tmp_path, settings, capsys):
    from django.core.management import call_command

    run, run_dir, tasks_file = hand_run
    reference_rows(monkeypatch, tmp_path, run_dir, tasks_file, tmp_path / "ref", 9)
    monkeypatch.chdir(settings.DATA_ROOT)
    call_command("taskgen", "rows", str(run_dir), "--out", "cli-out", "--budget", "9")
    ours = Path(settings.DATA_ROOT) / "cli-out"
    assert (ours / "_report.json").read_bytes() == (tmp_path / "ref" / "_report.json").read_bytes()
    assert sorted(p.name for p in ours.iterdir() if p.is_dir()) == sorted(
        p.name for p in (tmp_path / "ref").iterdir() if p.is_dir())
    assert Export.objects.get().out_dir == str(ours)


@pytest.mark.django_db
def test_a_run_with_nothing_to_export_writes_the_references_empty_report(monkeypatch, tmp_path, settings, capsys):
    """Judged successes without a rows folder (Online-Mind2Web's episodes, in the demo): the reference writes the
    folder and a _report.json of zeros; the command did the same work and then failed on the folder it never made
    ("not written in full", a resume failing again)."""
    from django.core.management import call_command

    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "bare", [
        HandTask("alpha", 1, rows=None), HandTask("beta", 1, rows=None), HandTask("beta", 2, rows=3, judged=False)])
    load_run_dir(run_dir, tasks_file)
    reference_rows(monkeypatch, tmp_path, run_dir, tasks_file, tmp_path / "ref", 9)
    monkeypatch.chdir(settings.DATA_ROOT)
    call_command("taskgen", "rows", str(run_dir), "--out", "cli-out", "--budget", "9")
    ours = Path(settings.DATA_ROOT) / "cli-out"
    assert (ours / "_report.json").read_bytes() == (tmp_path / "ref" / "_report.json").read_bytes()
    assert json.loads((ours / "_report.json").read_text())["selected_trajectories"] == 0
    assert "not written in full" not in capsys.readouterr().err
    pipeline_run = PipelineRun.objects.get(stage="export")
    assert pipeline_run.status == "done" and pipeline_run.result["nothing_to_do"].startswith("nothing to export")
    assert Export.objects.get().out_dir == str(ours)


@pytest.mark.django_db
@pytest.mark.parametrize("args,message", [
    (["--budget", "0"], "positive whole number"),
    (["--out", "/tmp/not-under-root"], "outside the data root"),
    (["--judge", "nope:x:y:z"], "no judge config"),
])
def test_the_rows_command_explains_bad_input_and_writes_nothing(hand_run, settings, capsys, args, message):
    from django.core.management import call_command

    run, *_ = hand_run
    argv = ["taskgen", "rows", run.name, "--out", str(Path(settings.DATA_ROOT) / "x"), *args]
    with pytest.raises(SystemExit) as exit_info:
        call_command(*argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (Path(settings.DATA_ROOT) / "x").exists() and Export.objects.count() == 0


GAP_TASKS = [HandTask("alpha", 0, rows=2, attempted=False), *HAND_TASKS[:5], HandTask("beta", 0, rows=1,
             attempted=False), *HAND_TASKS[5:]]


@pytest.mark.django_db
@pytest.mark.parametrize("budget", [5, 8, 12])
def test_a_run_imported_by_the_importer_exports_what_the_reference_exports(settings, monkeypatch, tmp_path, budget):
    """Tasks in tasks.jsonl without an episode folder still take their round-robin turn, as in the reference."""
    from taskgen.stages.import_.service import import_run_dir

    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "gaps", GAP_TASKS)
    run = import_run_dir(run_dir=run_dir, tasks_file=tasks_file).run
    reference_rows(monkeypatch, tmp_path, run_dir, tasks_file, tmp_path / "ref", budget)
    config = JudgeConfig.objects.get()
    export = export_create(run=run, source="judge", judge_config=config, budget=budget, out_dir="ours")
    ours = Path(settings.DATA_ROOT) / "ours"
    assert (ours / "_report.json").read_bytes() == (tmp_path / "ref" / "_report.json").read_bytes()
    assert sorted(p.name for p in ours.iterdir() if p.is_dir()) == sorted(
        p.name for p in (tmp_path / "ref").iterdir() if p.is_dir())
    assert export.manifest["params"]["order_from"] == "tasks file"


@pytest.mark.parametrize("task_id", ["../up", ".hidden", "a/b", "a\\b", "with space", "", "x" * 201])
def test_import_attempt_and_export_refuse_the_same_unsafe_task_ids(task_id):
    from taskgen.names import is_plain_name
    from taskgen.stages.export.output import safe_name

    assert not is_plain_name(task_id)
    with pytest.raises(ExportError, match="not a safe file name"):
        safe_name(task_id)
