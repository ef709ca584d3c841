"""The runs page (admins only): start any stage with its parameters, watch progress, cancel and resume."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ObjectDoesNotExist
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from review import selectors
from review.forms_pipeline import STAGE_FORMS, ExportForm, StageForm
from review.pipeline_summary import sentence, started_words
from taskgen.engine.contract import NothingToDo
from taskgen.models import PipelineRun
from taskgen.roles import Role, require_role
from taskgen.stages.begin import (
    ResumeError,
    StageUnavailable,
    pipeline_run_cancel,
    pipeline_run_resume,
    stage_start,
)
from taskgen.stages.certify.service import CertifyError, certificate_gate
from taskgen.stages.export.select import LEFT_OUT_WHY, ExportError, manifest_left_out_words
from taskgen.stages.export.service import export_create
from taskgen.stages.export.work import export_left_out_words
from taskgen.stages.paths import PathError

START_ERRORS = (PathError, ExportError, StageUnavailable, ObjectDoesNotExist, ValueError)


def _list_page(request: HttpRequest, forms: dict[str, StageForm], status: int = 200,
               export_preview: dict | None = None) -> HttpResponse:
    page = Paginator(selectors.pipeline_runs(), 50).get_page(request.GET.get("page"))
    context = {"forms": forms.values(), "page": page, "data_root": settings.DATA_ROOT, "preview": export_preview}
    return render(request, "review/pipeline_list.html", context, status=status)


@require_GET
@require_role(Role.ADMIN)
def pipeline_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request, {name: form() for name, form in STAGE_FORMS.items()})


def _export_preview(form: ExportForm) -> dict:
    """What the export form's values would write and leave out, before anything is written."""
    if not form.is_valid():
        return {"errors": [e for errors in form.errors.values() for e in errors]}
    try:
        selection = form.selection()
    except ExportError as exc:
        return {"errors": [str(exc)]}
    config = form.cleaned_data["judge_config"]
    preview = {"words": selection.left_out_words(), "rows": selection.rows, "config": config.key if config else "",
               "reasons": [(LEFT_OUT_WHY[why], n) for why, n in selection.left_out.items()]}
    if form.cleaned_data.get("certify") and selection.picked:
        preview["certificate"] = _export_certificate_words(selection, form.cleaned_data["certify"])
    return preview


def _export_certificate_words(selection, target: float) -> str:
    """What the gate will say of exactly these episodes, before anything is written."""
    try:
        certificate = certificate_gate(selection=selection, target=target)
    except CertifyError as exc:
        return str(exc)
    return (f"Certified: at least {certificate['lower']:.3f} of these {certificate['population']} episodes are real "
            f"successes with {certificate['confidence']:.0%} confidence (target {target}).")


@require_POST
@require_role(Role.ADMIN)
def export_preview(request: HttpRequest) -> HttpResponse:
    """What an export with the form's values would write and leave out, and why; it writes nothing (a POST only
    so the form's CSRF token never travels in a URL). htmx swaps it into the form; without JavaScript the runs page
    is shown with it."""
    form = ExportForm(request.POST)
    preview = _export_preview(form)
    if request.htmx:
        return render(request, "review/_export_preview.html", {"preview": preview})
    forms = {name: (form if name == "export" else cls()) for name, cls in STAGE_FORMS.items()}
    return _list_page(request, forms, export_preview=preview)


def _start_download_export(request: HttpRequest, form: StageForm) -> HttpResponse:
    params = form.cleaned_data
    export = export_create(run=params["run"], source=params["source"], judge_config=params["judge_config"],
                           budget=params["budget"], user=request.user,
                           include_reviewer_rejected=params["include_reviewer_rejected"],
                           include_verifier_failed=params["include_verifier_failed"],
                           exclude_risk=params["exclude_risk"], certify=params["certify"])
    messages.success(request, f"Export #{export.pk} is ready to download. {manifest_left_out_words(export.manifest)}")
    return redirect(export)


def _say_started(request: HttpRequest, pipeline_run: PipelineRun) -> None:
    started, words = started_words(pipeline_run)
    if pipeline_run.stage == PipelineRun.Stage.EXPORT:
        words = f"{words} {export_left_out_words(pipeline_run=pipeline_run)}"
    (messages.success if started else messages.info)(request, words)
    if note := (pipeline_run.params or {}).get("reach_note"):  # an attempt whose agent cannot do some of its tasks
        messages.warning(request, f"Note: {note}")


@require_POST
@require_role(Role.ADMIN)
def pipeline_start(request: HttpRequest, stage: str) -> HttpResponse:
    if stage not in STAGE_FORMS:
        raise Http404("no such stage")
    form = STAGE_FORMS[stage](request.POST)
    if form.is_valid():
        try:
            if stage == "export" and not form.cleaned_data["out_dir"]:
                return _start_download_export(request, form)
            pipeline_run = stage_start(stage=stage, params=form.params(), user=request.user)
        except NothingToDo as nothing:  # said, and no run is listed for it
            messages.info(request, sentence(str(nothing)))
            return redirect("review:pipeline_list")
        except START_ERRORS as exc:
            form.add_error(None, str(exc))
        else:
            _say_started(request, pipeline_run)
            return redirect(pipeline_run)
    forms = {name: (form if name == stage else cls()) for name, cls in STAGE_FORMS.items()}
    return _list_page(request, forms, status=400)


@require_GET
@require_role(Role.ADMIN)
def pipeline_detail(request: HttpRequest, pk: int) -> HttpResponse:
    pipeline_run = get_object_or_404(selectors.pipeline_runs(), pk=pk)
    jobs = selectors.judge_batch_jobs(pipeline_run_id=pk) if pipeline_run.params.get("batch") else []
    return render(request, "review/pipeline_detail.html", {"pr": pipeline_run, "batch_jobs": jobs})


@require_GET
@require_role(Role.ADMIN)
def pipeline_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress partial htmx polls, with the run's actions (and on its own page, its result and errors) swapped
    out of band so a finished run loses its Cancel and shows its summary, and its errors come with its failed count;
    once the run has ended it answers 286 to stop polling."""
    pipeline_run = get_object_or_404(selectors.pipeline_runs(), pk=pk)
    detail = request.GET.get("detail") == "1"
    context = {"pr": pipeline_run, "detail": detail, "oob": True}
    parts = ["review/_pipeline_progress.html", "review/_pipeline_actions.html"]
    # on its own page, the errors too: they come with the failed count, never a reload later
    parts += ["review/_pipeline_result.html", "review/_pipeline_errors.html"] if detail else []
    html = "".join(render_to_string(name, context, request=request) for name in parts)
    return HttpResponseStopPolling(html) if pipeline_run.is_finished else HttpResponse(html)


@require_POST
@require_role(Role.ADMIN)
def pipeline_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    pipeline_run = get_object_or_404(PipelineRun, pk=pk)
    if pipeline_run_cancel(pipeline_run=pipeline_run):
        messages.success(request, "Cancelled: queued work is dropped; work in progress stops after its current item.")
    else:
        messages.error(request, f"This run is already {pipeline_run.status}; nothing to cancel.")
    return redirect(pipeline_run)


@require_POST
@require_role(Role.ADMIN)
def pipeline_resume(request: HttpRequest, pk: int) -> HttpResponse:
    pipeline_run = get_object_or_404(PipelineRun, pk=pk)
    try:
        resumed = pipeline_run_resume(pipeline_run=pipeline_run, user=request.user)
    except (ResumeError, *START_ERRORS) as exc:
        messages.error(request, str(exc))
        return redirect(pipeline_run)
    messages.success(request, "Resumed: only what is not done runs again.")
    return redirect(resumed)
