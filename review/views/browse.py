"""Browsing: the runs list, a run's episodes, and screenshots (served to logged-in users only). The episode page is
the review workbench, in review/views/episode.py."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from review import selectors
from review.roles import Role, require_role
from taskgen.blobs import BlobError, blob_path, blob_thumbnail_file
from taskgen.models import Blob, Run

BLOB_CACHE = "private, max-age=31536000, immutable"  # names are content hashes: they never change


@require_GET
@require_role(Role.VIEWER)
def run_list(request: HttpRequest) -> HttpResponse:
    return render(request, "review/run_list.html", {"runs": selectors.runs_with_counts()})


@require_GET
@require_role(Role.VIEWER)
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    page = Paginator(selectors.run_episodes(run), 50).get_page(request.GET.get("page"))
    return render(request, "review/run_detail.html", {"run": run, "page": page})


def _serve_blob(path, content_type: str) -> FileResponse:
    if not path.exists():
        raise Http404("blob file missing")
    response = FileResponse(path.open("rb"), content_type=content_type)
    response["Cache-Control"] = BLOB_CACHE
    return response


@require_GET
@require_role(Role.VIEWER)
def blob(request: HttpRequest, sha256: str) -> FileResponse:
    row = get_object_or_404(Blob, sha256=sha256)
    return _serve_blob(blob_path(row), row.content_type)


@require_GET
@require_role(Role.VIEWER)
def blob_thumbnail(request: HttpRequest, sha256: str) -> FileResponse:
    row = get_object_or_404(Blob, sha256=sha256)
    try:
        path = blob_thumbnail_file(blob=row)  # made on first request, then served from disk
    except BlobError as exc:
        raise Http404(str(exc)) from exc
    return _serve_blob(path, "image/webp")
