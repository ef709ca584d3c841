"""Export history: every export with who, when, parameters and counts; its manifest; its rows as a .tar.gz."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from review import selectors
from review.roles import Role, require_role
from taskgen.stages.export.output import export_missing_files, export_stream_targz
from taskgen.stages.export.select import manifest_bytes


@require_GET
@require_role(Role.VIEWER)
def export_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(selectors.exports(), 50).get_page(request.GET.get("page"))
    return render(request, "review/export_list.html", {"page": page})


@require_GET
@require_role(Role.VIEWER)
def export_detail(request: HttpRequest, pk: int) -> HttpResponse:
    export = get_object_or_404(selectors.exports(), pk=pk)
    episodes = export.manifest.get("episodes", [])
    return render(request, "review/export_detail.html", {"export": export, "episodes": episodes[:500],
                                                          "more": max(0, len(episodes) - 500)})


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
