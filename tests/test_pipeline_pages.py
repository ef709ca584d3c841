"""The runs page and export history: who may see and start what, bad input, progress polling, downloads."""
from __future__ import annotations

import io
import re
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from django.urls import reverse

from taskgen.blobs import blob_path
from taskgen.engine.worker import work
from taskgen.models import Export, JudgeConfig, Judgment, PipelineRun, Screenshot, WorkUnit
from taskgen.providers.rules import VERSION as RULES_VERSION
from taskgen.stages.export.select import REPORT_KEYS, manifest_left_out_words
from taskgen.stages.export.service import export_create
from tests.factories import EpisodeFactory, RunFactory, UserFactory
from tests.runfiles import load_run_dir, write_run_dir
from tests.test_rows_export import HAND_TASKS


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Users made for these tests log in by session; hashing their passwords slowly buys nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def hand_run(settings):
    return load_run_dir(*write_run_dir(Path(settings.DATA_ROOT) / "hand", HAND_TASKS))


@pytest.fixture
def an_export(hand_run):
    return export_create(run=hand_run, source="judge", judge_config=JudgeConfig.objects.get(), budget=1000)


def export_post(run, out_dir="", budget="1000", source="judge") -> dict:
    return {"run": run.pk, "source": source, "judge_config": JudgeConfig.objects.get().pk, "budget": budget,
            "out_dir": out_dir}


def units_here(pipeline_run_id: int) -> None:
    """Work a run's units in this process until it ends (a unit told to wait is made due at once)."""
    for _ in range(20):
        WorkUnit.objects.filter(pipeline_run_id=pipeline_run_id, status="queued").update(not_before=None)
        work(pipeline_run_id=pipeline_run_id, owner="test")
        if PipelineRun.objects.get(pk=pipeline_run_id).is_finished:
            return


@pytest.fixture
def engine_here(monkeypatch):
    """Workers sent for a run work its units here, at once, instead of through a broker."""
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda pk, workers, countdown=0: units_here(pk) or True)


@pytest.fixture
def engine_off(monkeypatch):
    """Workers sent for a run go nowhere (the test works the units itself)."""
    monkeypatch.setattr("taskgen.engine.send.dispatch", lambda pk, workers, countdown=0: True)


ADMIN_GETS = ["review:pipeline_list"]
POSTS = [("review:pipeline_start", ["export"]), ("review:pipeline_cancel", [1]), ("review:pipeline_resume", [1])]


@pytest.mark.django_db
@pytest.mark.parametrize("fixture", ["viewer_client", "reviewer_client", "adjudicator_client", "norole_client"])
def test_only_admins_reach_the_runs_page_and_its_endpoints(request, fixture):
    client = request.getfixturevalue(fixture)
    pr = PipelineRun.objects.create(stage="export", status="failed")
    assert client.get(reverse("review:pipeline_list")).status_code == 403
    assert client.get(reverse("review:pipeline_detail", args=[pr.pk])).status_code == 403
    assert client.get(reverse("review:pipeline_progress", args=[pr.pk])).status_code == 403
    assert client.post(reverse("review:pipeline_start", args=["export"]), {}).status_code == 403
    assert client.post(reverse("review:pipeline_cancel", args=[pr.pk])).status_code == 403
    assert client.post(reverse("review:pipeline_resume", args=[pr.pk])).status_code == 403
    assert PipelineRun.objects.count() == 1 and PipelineRun.objects.get().status == "failed"


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_login(client, an_export):
    for url in [reverse("review:pipeline_list"), reverse("review:export_list"),
                reverse("review:export_download", args=[an_export.pk])]:
        assert client.get(url)["Location"].startswith("/accounts/login/")


@pytest.mark.django_db
def test_a_reviewer_sees_export_history_without_start_or_download_buttons(reviewer_client, an_export):
    page = reviewer_client.get(reverse("review:export_list")).content.decode()
    assert an_export.manifest_sha256[:12] in page
    detail = reviewer_client.get(an_export.get_absolute_url()).content.decode()
    assert "Download .tar.gz" not in detail and "tg-alpha-1" in detail
    assert reverse("review:pipeline_list") not in reviewer_client.get("/").content.decode()
    assert reviewer_client.get(reverse("review:export_download", args=[an_export.pk])).status_code == 403
    assert reviewer_client.get(reverse("review:export_manifest", args=[an_export.pk])).status_code == 200


@pytest.mark.django_db
def test_the_export_list_never_loads_a_manifest_and_shows_its_figures(reviewer_client, an_export,
                                                                       django_assert_max_num_queries):
    """A manifest is the whole episode list (megabytes at full size): the list reads its few figures in SQL."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        page = reviewer_client.get(reverse("review:export_list")).content.decode()
    whole = re.compile(r'(SELECT |, )"taskgen_export"\."manifest"(,| FROM)')  # the column, not a figure out of it
    loaded = [q["sql"] for q in queries if whole.search(q["sql"])]
    assert not loaded, loaded
    report = an_export.report
    cells = [f'<td class="num">{value:,}</td>' for value in (  # grouped by thousands: "1,000"
        an_export.budget, report["selected_trajectories"], report["selected_rows"], report["sites"])]
    assert all(cell in page for cell in cells), cells


@pytest.mark.django_db
def test_views_refuse_the_wrong_method(admin_client_role, an_export):
    assert admin_client_role.post(reverse("review:pipeline_list")).status_code == 405
    assert admin_client_role.get(reverse("review:pipeline_start", args=["export"])).status_code == 405
    assert admin_client_role.post(reverse("review:export_download", args=[an_export.pk])).status_code == 405


@pytest.mark.django_db
def test_a_get_of_a_post_only_address_is_a_page_that_says_what_it_is_for(admin_client_role, reviewer_client):
    """It answered 405 with an empty body: a blank page."""
    for client, url in ((admin_client_role, reverse("review:pipeline_start", args=["judge"])),
                        (reviewer_client, reverse("review:label_post", args=[EpisodeFactory().pk])),
                        (reviewer_client, reverse("logout"))):
        response = client.get(url)
        page = response.content.decode()
        assert response.status_code == 405 and response["Allow"].startswith("POST"), url
        assert "<nav>" in page and "Not a page to open" in page and f"<code>{url}</code> takes POST requests" in page
        assert "Nothing was changed" in page
    sandbox = reviewer_client.get("/sites/enter/")  # the sandbox websites answer as the sites they imitate
    assert sandbox.status_code == 405 and b"Not a page to open" not in sandbox.content


@pytest.mark.django_db
def test_the_empty_runs_page_says_what_to_do(admin_client_role):
    page = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    assert "Nothing has been started yet" in page and "Start export" in page


@pytest.mark.django_db
def test_the_runs_page_says_who_started_each_run_and_names_the_command_line(admin_client_role):
    """Seen on `make demo`'s pipeline list: runs its set-up started showed "—" under Started by, where their own page
    says "the command line"."""
    PipelineRun.objects.create(stage="export", status="done", total=1, done=1)
    PipelineRun.objects.create(stage="export", status="done", total=1, done=1, started_by=admin_client_role.user)
    page = admin_client_role.get(reverse("review:pipeline_list")).content.decode()
    started_by = re.findall(r"<td>([^<]*)</td><td>\d{4}-\d\d-\d\d \d\d:\d\d</td>", page)  # the cell before When
    assert started_by == [admin_client_role.user.get_username(), "the command line"], started_by


@pytest.mark.django_db
def test_admin_makes_a_download_export_and_gets_the_same_files(admin_client_role, hand_run, settings):
    response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]), export_post(hand_run))
    export = Export.objects.get()
    assert response.status_code == 302 and response["Location"] == export.get_absolute_url()
    assert export.created_by == admin_client_role.user and export.out_dir == ""
    download = admin_client_role.get(reverse("review:export_download", args=[export.pk]))
    assert download["Content-Type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(b"".join(download.streaming_content)), mode="r:gz") as tar:
        names = tar.getnames()
    assert f"export-{export.pk}/tg-alpha-1/rows.jsonl" in names and f"export-{export.pk}/_report.json" in names


@pytest.mark.django_db
@pytest.mark.parametrize("out_dir,budget,message", [
    ("/etc/rows", "10", "outside the data root"),
    ("../escape", "10", "outside the data root"),
    ("fine", "0", "greater than or equal to 1"),
    ("fine", "many", "Enter a whole number"),
])
def test_bad_export_input_is_refused_with_a_clear_error_and_nothing_written(admin_client_role, hand_run, settings,
                                                                             out_dir, budget, message):
    response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]),
                                      export_post(hand_run, out_dir=out_dir, budget=budget))
    assert response.status_code == 400 and message in response.content.decode()
    assert PipelineRun.objects.count() == 0 and Export.objects.count() == 0
    assert sorted(p.name for p in Path(settings.DATA_ROOT).iterdir()) == ["hand"]


@pytest.mark.django_db
def test_an_export_into_a_folder_that_is_not_empty_is_refused(admin_client_role, hand_run, settings):
    (Path(settings.DATA_ROOT) / "full").mkdir()
    (Path(settings.DATA_ROOT) / "full" / "old.jsonl").write_text("x")
    response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]),
                                      export_post(hand_run, out_dir="full"))
    assert response.status_code == 400 and "not empty" in response.content.decode()
    assert [p.name for p in (Path(settings.DATA_ROOT) / "full").iterdir()] == ["old.jsonl"]


@pytest.mark.django_db
def test_an_import_path_outside_the_data_root_is_refused(admin_client_role, tmp_path):
    (tmp_path / "outside").mkdir()
    response = admin_client_role.post(reverse("review:pipeline_start", args=["import"]),
                                      {"run_dir": str(tmp_path / "outside")})
    assert response.status_code == 400
    assert "outside the data root" in response.content.decode()
    assert PipelineRun.objects.count() == 0


@pytest.mark.django_db
def test_a_folder_export_runs_in_the_background_and_its_progress_stops_polling_when_done(
        admin_client_role, hand_run, settings, django_capture_on_commit_callbacks, engine_here):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client_role.post(reverse("review:pipeline_start", args=["export"]),
                                          export_post(hand_run, out_dir="bg"))
    pr = PipelineRun.objects.get()
    assert response["Location"] == pr.get_absolute_url() and pr.status == "running" and pr.done == 0
    assert pr.units.count() == pr.total == 8  # one unit per episode to write
    progress = admin_client_role.get(reverse("review:pipeline_progress", args=[pr.pk]), HTTP_HX_REQUEST="true")
    assert progress.status_code == 200 and "hx-trigger" in progress.content.decode()
    for callback in callbacks:
        callback()
    pr.refresh_from_db()
    assert pr.status == "done" and pr.done == pr.total == 8 and pr.started_by == admin_client_role.user
    progress = admin_client_role.get(reverse("review:pipeline_progress", args=[pr.pk]), HTTP_HX_REQUEST="true")
    assert progress.status_code == 286 and "hx-trigger" not in progress.content.decode()
    assert (Path(settings.DATA_ROOT) / "bg" / "_report.json").exists()
    assert Export.objects.get().pk == pr.result["export_id"]


@pytest.mark.django_db
def test_a_failed_export_keeps_what_it_wrote_and_resumes_only_the_rest(admin_client_role, hand_run, settings,
                                                                       engine_off):
    admin_client_role.post(reverse("review:pipeline_start", args=["export"]), export_post(hand_run, out_dir="f"))
    pr = PipelineRun.objects.get()
    shot = Screenshot.objects.get(episode__task__task_id="tg-beta-2")
    image = blob_path(shot.blob).read_bytes()
    blob_path(shot.blob).unlink()
    units_here(pr.pk)
    pr.refresh_from_db()
    assert pr.status == "failed" and (pr.done, pr.failed) == (7, 1) and "tg-beta-2" in pr.errors[0]
    assert not (Path(settings.DATA_ROOT) / "f" / "_report.json").exists() and Export.objects.count() == 0
    blob_path(shot.blob).write_bytes(image)
    kept = (Path(settings.DATA_ROOT) / "f" / "tg-alpha-1").stat().st_ino
    assert admin_client_role.post(reverse("review:pipeline_resume", args=[pr.pk])).status_code == 302
    units_here(pr.pk)
    pr.refresh_from_db()
    assert pr.status == "done" and (pr.done, pr.failed) == (8, 0)
    assert (Path(settings.DATA_ROOT) / "f" / "tg-alpha-1").stat().st_ino == kept


@pytest.mark.django_db
def test_cancel_only_applies_to_runs_in_progress(admin_client_role):
    done = PipelineRun.objects.create(stage="export", status="done")
    admin_client_role.post(reverse("review:pipeline_cancel", args=[done.pk]))
    done.refresh_from_db()
    assert done.status == "done"
    queued = PipelineRun.objects.create(stage="export", status="queued")
    admin_client_role.post(reverse("review:pipeline_cancel", args=[queued.pk]))
    queued.refresh_from_db()
    assert queued.status == "cancelled" and queued.finished_at is not None


@pytest.mark.django_db
def test_judging_with_gemini_and_no_key_is_refused_with_a_reason(admin_client_role, settings):
    settings.GEMINI_API_KEY = ""
    response = admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), {
        "run": RunFactory().pk, "provider": "gemini", "model": "gemini-3.5-flash", "prompt_version": "judge-v1",
        "image_policy": "default"})
    assert response.status_code == 400 and "GEMINI_API_KEY" in response.content.decode()
    assert not PipelineRun.objects.exists()


@pytest.mark.django_db
def test_untrusted_text_is_escaped_on_the_pages(admin_client_role, settings):
    episode = EpisodeFactory(task__task_id="tg-x-<script>1", has_rows=True, row_count=1, rows_jsonl="{}\n")
    config = JudgeConfig.objects.create(provider="rules", model="m", prompt_version="v1")
    episode.judgments.create(config=config, verdict="SUCCESS")
    export = export_create(run=episode.run, source="judge", judge_config=config)
    page = admin_client_role.get(export.get_absolute_url()).content.decode()
    assert "tg-x-<script>1" not in page and "tg-x-&lt;script&gt;1" in page


@pytest.mark.django_db
def test_a_download_refuses_up_front_when_an_image_is_missing(admin_client_role, an_export):
    shot = Screenshot.objects.get(episode__task__task_id="tg-beta-2")
    blob_path(shot.blob).unlink()
    response = admin_client_role.get(reverse("review:export_download", args=[an_export.pk]))
    assert response.status_code == 409 and "missing" in response.content.decode()


@pytest.mark.django_db
def test_a_streamed_download_of_a_large_export_holds_memory_flat(admin_client_role, settings):
    """~16 MB of row images streamed: the peak traced memory stays a small fraction of it."""
    run = RunFactory()
    config = JudgeConfig.objects.create(provider="rules", model="m", prompt_version="v1")
    from taskgen.models import Blob

    blobs = []
    for i in range(16):
        data = bytes([i]) * 8 + Path("/dev/urandom").open("rb").read(1_000_000)
        blob = Blob.objects.create(sha256=f"{i:064x}", size=len(data))
        blob_path(blob).parent.mkdir(parents=True, exist_ok=True)
        blob_path(blob).write_bytes(data)
        blobs.append(blob)
    for n in range(16):
        episode = EpisodeFactory(run=run, task__task_id=f"tg-big-{n}", has_rows=True, row_count=1,
                                 rows_jsonl='{"row": 1}\n' * 1, episode_json="{}")
        episode.judgments.create(config=config, verdict="SUCCESS")
        Screenshot.objects.create(episode=episode, kind="row", step=0, name="step_0.png", blob=blobs[n])
    export = export_create(run=run, source="judge", judge_config=config)
    response = admin_client_role.get(reverse("review:export_download", args=[export.pk]))
    tracemalloc.start()
    total = 0
    for chunk in response.streaming_content:
        total += len(chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total > 16_000_000
    assert peak < 4_000_000, f"peak {peak:,} bytes while streaming {total:,}"


@pytest.mark.django_db
def test_admin_imports_a_run_dir_from_the_data_root_and_watches_it_finish(admin_client_role, settings, engine_here,
                                                                         django_capture_on_commit_callbacks):
    run_dir, tasks_file = write_run_dir(Path(settings.DATA_ROOT) / "fresh", HAND_TASKS)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_role.post(reverse("review:pipeline_start", args=["import"]),
                                          {"run_dir": "fresh/run", "tasks_file": "fresh/tasks.jsonl", "name": "fresh"})
    pr = PipelineRun.objects.get()
    assert response["Location"] == pr.get_absolute_url()
    assert pr.status == "done" and pr.done == pr.total == 1 and pr.run.name == "fresh"  # one unit: the run dir
    assert pr.run.episodes.count() == len(HAND_TASKS) and pr.result["episodes_added"] == len(HAND_TASKS)
    page = admin_client_role.get(pr.get_absolute_url()).content.decode()
    assert "No errors." in page and "fresh" in page


@pytest.mark.django_db
def test_the_django_admin_action_starts_an_export_of_human_rows(client, hand_run, settings):
    from django.contrib.auth import get_user_model

    from taskgen.models import FinalLabel

    FinalLabel.objects.create(episode=hand_run.episodes.get(task__task_id="tg-beta-1"), verdict="SUCCESS")
    superuser = get_user_model().objects.create_superuser("root", "", "pw-for-tests")
    client.force_login(superuser)
    response = client.post(reverse("admin:taskgen_run_changelist"),
                           {"action": "export_human_rows", "_selected_action": [hand_run.pk]})
    assert response.status_code == 302
    pr = PipelineRun.objects.get()
    assert pr.stage == "export" and pr.params["source"] == "human" and pr.started_by == superuser
    assert Path(pr.params["out_dir"]).is_relative_to(Path(settings.DATA_ROOT).resolve() / "exports")


@pytest.mark.django_db
def test_the_django_admin_action_judges_with_the_default_judge(client, hand_run, settings, monkeypatch):
    from django.contrib.auth import get_user_model

    settings.JUDGE_PROVIDER = "rules"
    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda *args, **kwargs: None)
    client.force_login(get_user_model().objects.create_superuser("root", "", "pw-for-tests"))
    response = client.post(reverse("admin:taskgen_run_changelist"),
                           {"action": "judge_runs", "_selected_action": [hand_run.pk]}, follow=True)
    assert "not started" not in response.content.decode()
    pr = PipelineRun.objects.get()
    assert pr.stage == "judge" and pr.run == hand_run and pr.params["judge"].startswith("rules:")


@pytest.mark.django_db
def test_a_staff_user_without_the_admin_role_cannot_start_stages_from_the_django_admin(client, hand_run):
    from django.contrib.auth.models import Permission

    staff = UserFactory(username="staff", role="reviewer")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_run", "change_run"]))
    client.force_login(staff)
    client.post(reverse("admin:taskgen_run_changelist"), {"action": "judge_runs", "_selected_action": [hand_run.pk]})
    assert PipelineRun.objects.count() == 0


@pytest.mark.django_db
def test_judge_starts_from_the_page_finishes_and_resumes_its_own_units(admin_client_role, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    from taskgen.engine.worker import work

    monkeypatch.setattr("taskgen.engine.tasks.work_task.apply_async", lambda args, **kwargs:
                        work(pipeline_run_id=args[0], owner="test"))
    run = RunFactory()
    EpisodeFactory.create_batch(2, run=run)
    form = {"run": run.pk, "provider": "rules", "model": "ignored", "prompt_version": "judge-v1",
            "image_policy": "default"}
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_role.post(reverse("review:pipeline_start", args=["judge"]), form)
    first = PipelineRun.objects.get()
    assert response["Location"] == first.get_absolute_url()
    assert first.params["judge"] == f"rules:{RULES_VERSION}:judge-v1:none"
    assert first.params["started_with"]["run"] == run.pk
    assert run.episodes.filter(judgments__config__provider="rules").count() == 2

    assert first.status == "done" and first.result["episodes"] == 2 and first.units.count() == 2

    PipelineRun.objects.filter(pk=first.pk).update(status="failed")
    first.units.filter(key=str(run.episodes.first().pk)).update(status="failed", last_error="lost")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_role.post(reverse("review:pipeline_resume", args=[first.pk]))
    assert response["Location"] == first.get_absolute_url() and PipelineRun.objects.count() == 1
    first.refresh_from_db()
    assert first.status == "done" and first.done == 2 and first.failed == 0
    assert Judgment.objects.filter(episode__run=run).count() == 2  # the judged episode was not judged twice


@pytest.mark.django_db
def test_validate_runs_in_the_background_and_keeps_its_report(admin_client_role, monkeypatch, engine_here,
                                                              django_capture_on_commit_callbacks):
    import types

    report = types.SimpleNamespace(as_dict=lambda: {"precision": 0.9, "false_positives": [{"task_id": "t1"}]})
    monkeypatch.setattr("taskgen.stages.validate.work.validate_compute",
                        lambda *, runs, config, against, reviewer=None: report)
    run, config = RunFactory(), JudgeConfig.objects.create(provider="rules", model="m", prompt_version="v1")
    with django_capture_on_commit_callbacks(execute=True):
        admin_client_role.post(reverse("review:pipeline_start", args=["validate"]),
                               {"runs": [run.pk], "config": config.pk, "against": "verifier"})
    pr = PipelineRun.objects.get()
    assert pr.status == "done" and pr.result["precision"] == 0.9 and pr.params["runs"] == [run.pk]
    page = admin_client_role.get(pr.get_absolute_url()).content.decode()  # the result summary says it
    assert "<th>precision</th><td>0.9</td>" in page and "<th>false positives</th><td>1 item</td>" in page


@pytest.mark.django_db
def test_an_export_page_says_what_chose_its_episodes_and_what_it_left_out(reviewer_client, hand_run):
    """Seen on a download export of `make demo`: its page's Parameters table held only an empty `out_dir`; the
    judge config, the budget, what was included or left out by choice were only in the manifest's JSON, and the
    sentence saying what was left out, and why, only in the message shown once after it was made."""
    config = JudgeConfig.objects.get()
    export = export_create(run=hand_run, source="judge", judge_config=config, budget=1000,
                           exclude_risk=("verifier_disagrees",))
    page = reviewer_client.get(export.get_absolute_url()).content.decode()
    chose = page.split("<h2>What chose these episodes</h2>", 1)[1].split("</table>", 1)[0]
    for shown in (hand_run.name, config.key, "1,000 steps", "verifier_disagrees"):
        assert shown in chose, shown
    assert "<th>out_dir</th>" not in page  # where it was written is said at the top, when it was written anywhere
    assert manifest_left_out_words(export.manifest) in page
    report = page.split("<h2>Report</h2>", 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<th>(\w+)</th>", report) == list(REPORT_KEYS)  # the reference's order, not jsonb's
    # the same sentence from the stored manifest: PostgreSQL's jsonb keeps its keys in an order of its own
    assert manifest_left_out_words(Export.objects.get(pk=export.pk).manifest) == manifest_left_out_words(
        export.manifest)


@pytest.mark.django_db
def test_a_pipeline_runs_parameters_read_in_the_same_order_on_any_database(admin_client_role):
    """Seen on PostgreSQL: a run's Parameters table came in jsonb's key order (shortest key first), on SQLite in the
    order written; it reads in name order on both, as its Result table does, its values as the Result shows them
    (not Python's False, None), and leaves out the form's own values."""
    params = {"run": "r1", "workers": 4, "judge_config": "gemini", "batch": False, "limit": None,
              "agent_options": {"model": "m"}, "started_with": {"x": 1}, "model": "", "skipped": []}
    pipeline_run = PipelineRun.objects.create(stage="judge", status="done", total=1, done=1, params=params)
    page = admin_client_role.get(reverse("review:pipeline_detail", args=[pipeline_run.pk])).content.decode()
    table = page.split("<h2>Parameters</h2>")[1].split("</table>")[0]
    rows = re.findall(r"<tr><th>([^<]*)</th><td><code>([^<]*)</code></td></tr>", table)
    assert rows == [("agent options", "model m"), ("batch", "no"), ("judge config", "gemini"), ("limit", "—"),
                    ("model", "—"), ("run", "r1"), ("skipped", "none"), ("workers", "4")]  # a blank, an empty list
