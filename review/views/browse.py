"""Browsing: the runs list, a run's episodes, and screenshots (served to logged-in users only). The episode page is
the review workbench, in review/views/episode.py."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from review import selectors
from review.run_table import (
    Sort,
    TableRows,
    run_columns,
    run_table_rows,
    sort_parse,
)
from taskgen.blobs import BlobError, blob_path, blob_thumbnail_file
from taskgen.labels.fields import QUEUE_NAME_MAX
from taskgen.models import Blob, JudgeConfig, Judgment, Run
from taskgen.roles import Role, require_role
from taskgen.triage.filters import (
    EpisodeFilter,
    FilterError,
    describe,
    episode_filter_parse,
    filter_form_choices,
)
from taskgen.triage.risk import risk_reasons

BLOB_CACHE = "private, max-age=31536000, immutable"  # names are content hashes: they never change


@require_GET
@require_role(Role.VIEWER)
def run_list(request: HttpRequest) -> HttpResponse:
    return render(request, "review/run_list.html", {"runs": selectors.runs_with_counts()})


def _config(run: Run, raw: str | None, configs: list[JudgeConfig]) -> JudgeConfig | None:
    """The judge config whose verdicts the table shows: the one asked for, else the one that judged most of the
    run's first episodes (a look at 200 episodes through the index, not a count over the whole run)."""
    if raw and raw.isdigit() and len(raw) < 15:
        return next((c for c in configs if c.pk == int(raw)), None)
    first = run.episodes.order_by("task_order", "id").values("pk")[:200]
    used = (Judgment.objects.filter(episode_id__in=first).values("config_id").annotate(n=Count("id"))
            .order_by("-n", "config_id").values_list("config_id", flat=True).first())
    return next((c for c in configs if c.pk == used), None)


@require_GET
@require_role(Role.VIEWER)
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A run's episodes to triage: columns, filters, sort and search, all in the URL (so a view can be shared or
    saved as a queue)."""
    run = get_object_or_404(Run, pk=pk)
    configs = list(JudgeConfig.objects.order_by("provider", "model", "id"))  # a handful: every one is offered
    config = _config(run, request.GET.get("config"), configs)
    sort, f, error = _sort_and_filter(request, config.pk if config else None)
    f.runs = []  # this page is the run; a saved queue names it
    rows = TableRows(run=run, f=f, sort=sort)
    total = rows.total
    page = Paginator(rows, 50).get_page(request.GET.get("page"))
    context = {"run": run, "page": page, "rows": _rows_with_flags(page, f.config_id), "config": config, "f": f,
               "sort": sort, "filter_error": error, "filter_words": describe(f), "columns": run_columns(sort),
               "configs": configs, "query": _query_without(request, "page"),
               "sort_query": _query_without(request, "page", "sort"), "total": total, **filter_form_choices(run),
               "queue_name_max": QUEUE_NAME_MAX}
    return render(request, "review/run_detail.html", context)


def _sort_and_filter(request: HttpRequest, config_id: int | None) -> tuple[Sort, EpisodeFilter, str]:
    """The table's sort and filter from the URL; what names no column or no value is said (and sorted by line, or
    left unfiltered), never silently dropped."""
    errors = []
    try:
        sort = sort_parse(request.GET.get("sort"))
    except FilterError as exc:
        sort = Sort("line", False)
        errors.append(str(exc))
    try:
        f = episode_filter_parse(request.GET, config_id=config_id)
    except FilterError as exc:
        f = EpisodeFilter(config_id=config_id)
        errors.append(str(exc))
    return sort, f, "; ".join(errors)


def _rows_with_flags(page, config_id: int | None) -> list[dict]:
    """The page's rows with their risk flags in words (two queries in all)."""
    rows = run_table_rows(list(page), config_id)
    reasons = risk_reasons([row["pk"] for row in rows], config_id)
    for row in rows:
        row["reasons"] = "; ".join(reasons.get(row["pk"], []))
    return rows


def _query_without(request: HttpRequest, *names: str) -> str:
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


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
