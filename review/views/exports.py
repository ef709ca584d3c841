"""Export history: every export with who, when, parameters and counts; its manifest; its rows as a .tar.gz."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from review import selectors
from review.views.certify import ERRORS as CERTIFY_ERRORS
from review.views.certify import certificate_for, certify_choices
from taskgen.labels.backup import labels_export_lines
from taskgen.models import Export, PipelineRun
from taskgen.roles import Role, require_role
from taskgen.stages.begin import labels_restore_begin
from taskgen.stages.export.output import export_missing_files, export_stream_targz
from taskgen.stages.export.select import manifest_bytes, manifest_left_out_words, report_ordered
from taskgen.stages.labels.work import labels_restore_refusals
from taskgen.triage.filters import filter_form_choices
from taskgen.triage.risk import RISK_WORDS


@require_GET
@require_role(Role.VIEWER)
def export_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.exports_listed(), 50).get_page(request.GET.get("page"))
    context = {"page": page, **filter_form_choices()}
    if request.GET.get("run"):  # the certificate panel of the export the small form names
        try:
            choices = certify_choices(request.GET)
            context["cert"] = certificate_for(choices.pop("run"), choices.pop("judge_config"), **choices)
        except CERTIFY_ERRORS as exc:
            context["cert_error"] = str(exc)
    return render(request, "review/export_list.html", context)


@require_GET
@require_role(Role.VIEWER)
def export_detail(request: HttpRequest, pk: int) -> HttpResponse:
    export = get_object_or_404(selectors.exports(), pk=pk)
    episodes = export.manifest.get("episodes", [])
    return render(request, "review/export_detail.html", {
        "export": export, "episodes": episodes[:500], "more": max(0, len(episodes) - 500),
        "report": report_ordered(export.report), "chose": export_choices(export.manifest.get("params") or {}),
        "left_out_words": manifest_left_out_words(export.manifest)})


def _included(value: object) -> str:
    return "included" if value else "left out"


def export_choices(params: dict) -> list[tuple[str, str]]:
    """What chose an export's episodes, from its manifest's parameters, in the export form's words (a manifest
    written before a parameter existed shows the parameters it has)."""
    words = {
        "run": ("Run", str),
        "source": ("Source", lambda v: str(Export.Selection(v).label) if v in Export.Selection.values else str(v)),
        "judge_config": ("Judge config (whose verdicts count)", lambda v: str(v) if v else "none: human labels"),
        "budget": ("Budget", lambda v: f"{v:,} steps" if isinstance(v, int) else f"{v} steps"),
        "include_reviewer_rejected": ("Judge successes reviewers labelled Not success", _included),
        "include_verifier_failed": ("Episodes the verifier failed", _included),
        "exclude_risk": ("Left out: episodes holding", lambda v: "; ".join(
            f"{RISK_WORDS.get(name, name)} ({name})" for name in v) or "no risk left out"),
        "order_from": ("Order", lambda v: "sites round robin, each site's tasks in "
                       + ("the tasks file's order" if v == "tasks file" else "the order the episodes recorded")),
    }
    return [(label, shown(params[key])) for key, (label, shown) in words.items() if key in params]


@require_GET
@require_role(Role.VIEWER)
def export_manifest(request: HttpRequest, pk: int) -> HttpResponse:
    export = get_object_or_404(selectors.exports(), pk=pk)
    response = HttpResponse(manifest_bytes(export.manifest), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="export-{export.pk}-manifest.json"'
    return response


@require_GET
@require_role(Role.ADMIN)
def export_download(request: HttpRequest, pk: int) -> HttpResponse:
    """The export as a .tar.gz streamed a file at a time; refused up front when a row image has gone missing."""
    export = get_object_or_404(selectors.exports(), pk=pk)
    missing = export_missing_files(export=export)
    if missing:
        return render(request, "review/export_detail.html", {"export": export, "missing": missing[:20],
                                                              "episodes": [], "more": 0}, status=409)
    response = StreamingHttpResponse(export_stream_targz(export=export), content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="export-{export.pk}.tar.gz"'
    return response


@require_GET
@require_role(Role.ADMIN)
def labels_download(request: HttpRequest) -> HttpResponse:
    """Every label, its history and the final labels, as the JSON lines `taskgen labels export` writes."""
    response = StreamingHttpResponse(labels_export_lines(), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="labels-{timezone.now():%Y%m%d-%H%M%S}.jsonl"'
    return response


@require_POST
@require_role(Role.ADMIN)
def labels_upload(request: HttpRequest) -> HttpResponse:
    """Store a labels backup and restore it on the engine (the request only stores the file); the run's page shows
    its progress, its counts and every line it refused."""
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a labels file (.jsonl) written by a labels export.")
        return redirect("review:export_list")
    pipeline_run = labels_restore_begin(source=upload.file, name=upload.name,
                                        all_or_nothing=request.POST.get("all_or_nothing") == "on", user=request.user)
    messages.success(request, f"Restoring labels from {upload.name}: every line is checked before any is written.")
    return redirect(pipeline_run)


@require_GET
@require_role(Role.ADMIN)
def labels_restore_refused(request: HttpRequest, pk: int) -> HttpResponse:
    """Every line a labels restore refused, with its number and why, as plain text."""
    pipeline_run = get_object_or_404(PipelineRun, pk=pk, stage=PipelineRun.Stage.LABELS)
    lines = labels_restore_refusals(pipeline_run)
    return HttpResponse("".join(f"{line}\n" for line in lines) or "No line was refused.\n",
                        content_type="text/plain; charset=utf-8")
