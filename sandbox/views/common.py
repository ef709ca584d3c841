"""Helpers the sandbox sites share: pagination over plain lists, and form values."""
from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest

from sandbox.state import SiteState

PER_PAGE = 8


def paginate(rows: list, request: HttpRequest, per_page: int = PER_PAGE) -> Page:
    return Paginator(rows, per_page).get_page(request.GET.get("page"))


def row_or_404(state: SiteState, collection: str, row_id) -> dict:
    row = state.get(collection, row_id)
    if row is None:
        raise Http404(f"No such item in {collection}: {row_id}")
    return row


def int_field(value, default: int, low: int, high: int) -> int:
    """A form number, clamped to [low, high]; anything unreadable is the default."""
    try:
        return max(low, min(high, int(value)))
    except (TypeError, ValueError):
        return default


def query_without_page(request: HttpRequest) -> str:
    """The current query string minus `page`, so pagination links keep the filters."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
