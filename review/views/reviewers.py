"""The reviewers page: each reviewer's accuracy on known-truth checks (episodes a verifier decided, mixed into
queues unmarked), with its 95% interval, and who falls below the accuracy chosen (their labels are flagged in
adjudication)."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from review.models import Queue
from taskgen.labels.quality import BASES, QualityError, reviewer_accuracy, share_check
from taskgen.roles import Role, require_role


def accuracy_chosen(request: HttpRequest) -> tuple[float, str, str]:
    """The accuracy a page was asked for (`?accuracy=0.9`, or the setting), its basis, and what was wrong with a
    bad value ("" when none)."""
    basis = request.GET.get("basis") if request.GET.get("basis") in BASES else "estimate"
    raw = request.GET.get("accuracy", "").strip()
    if not raw:
        return settings.REVIEWER_MIN_ACCURACY, basis, ""
    try:
        return share_check(raw, what="the accuracy", zero_ok=False), basis, ""
    except QualityError as exc:
        return settings.REVIEWER_MIN_ACCURACY, basis, str(exc)


@require_GET
@require_role(Role.ADJUDICATOR)
def reviewers(request: HttpRequest) -> HttpResponse:
    threshold, basis, error = accuracy_chosen(request)
    context = {"rows": [(row, row.below(threshold, basis)) for row in reviewer_accuracy()], "threshold": threshold,
               "basis": basis,
               "bases": BASES, "error": error,
               "queues_with_checks": Queue.objects.filter(check_rate__gt=0).select_related("run").order_by("name")}
    return render(request, "review/reviewers.html", context)
