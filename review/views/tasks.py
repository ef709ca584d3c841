"""The Tasks pages: every site's tasks by review state, one site's tasks (reviewers browse and flag; admins edit,
drop, restore and approve, in bulk and with the keyboard), a task's edit page with its history, and a proposal
batch as the proposer saw and answered it. Proposed text is untrusted: templates escape it (never |safe)."""
from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from review import task_selectors
from review.forms_pipeline import AttemptApprovedForm
from review.task_review import TaskReviewError, task_edit, task_flag, tasks_state_set
from taskgen.models import ProposalBatch, Site, Task
from taskgen.roles import Role, has_role, require_role
from taskgen.stages.propose.rules import LABEL as RULES_LABEL

PAGE_SIZE = 200


class TaskEditForm(forms.Form):
    instruction = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), max_length=2000)
    task_kind = forms.ChoiceField(choices=Task.Kind.choices, label="Kind")


@require_GET
@require_role(Role.REVIEWER)
def task_sites(request: HttpRequest) -> HttpResponse:
    context = {"sites": task_selectors.sites_with_task_counts(), "rules_label": RULES_LABEL,
               "proposing": task_selectors.proposing_now(),
               "attempt_form": AttemptApprovedForm() if has_role(request.user, Role.ADMIN) else None}
    return render(request, "review/task_sites.html", context)


def _site_url(site: Site, show: str = "", page: str = "") -> str:
    query = urlencode({k: v for k, v in (("show", show), ("page", page)) if v})
    return reverse("review:site_tasks", args=[site.slug]) + (f"?{query}" if query else "")


@require_GET
@require_role(Role.REVIEWER)
def site_tasks(request: HttpRequest, slug: str) -> HttpResponse:
    site = get_object_or_404(Site, slug=slug)
    show = request.GET.get("show", "")
    page = Paginator(task_selectors.site_tasks(site=site, show=show), PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"site": site, "page": page, "show": show, "filters": ["", *task_selectors.STATE_FILTERS],
               "summary": task_selectors.site_task_summary(site=site), "rules_label": RULES_LABEL,
               "here": _site_url(site, show, request.GET.get("page", ""))}
    return render(request, "review/site_tasks.html", context)


def _back(request: HttpRequest, site: Site) -> str:
    """Where a post returns: the page it came from, when that is this site's Tasks page."""
    back = request.POST.get("next", "")
    return back if back.startswith(reverse("review:site_tasks", args=[site.slug])) else _site_url(site)


@require_POST
@require_role(Role.ADMIN)
def tasks_bulk(request: HttpRequest, slug: str) -> HttpResponse:
    site = get_object_or_404(Site, slug=slug)
    ids = [int(x) for x in request.POST.getlist("task") if x.isdigit()]
    if not ids:
        messages.error(request, "Select tasks first (click their boxes, or x on the keyboard).")
        return redirect(_back(request, site))
    try:
        changed = tasks_state_set(site=site, task_ids=ids, action=request.POST.get("action", ""), user=request.user)
    except TaskReviewError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{request.POST['action'].capitalize()}: {changed} of {len(ids)} tasks changed.")
    return redirect(_back(request, site))


@require_http_methods(["GET", "POST"])
@require_role(Role.ADMIN)
def task_edit_page(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("site", "proposal_batch"), pk=pk)
    form = TaskEditForm(request.POST or None, initial={"instruction": task.instruction, "task_kind": task.task_kind})
    if request.method == "POST" and form.is_valid():
        try:
            changed = task_edit(task=task, user=request.user, **form.cleaned_data)
        except TaskReviewError as exc:
            form.add_error("instruction", str(exc))
        else:
            messages.success(request, "Saved." if changed else "Nothing changed.")
            return redirect(_site_url(task.site))
    context = {"task": task, "form": form, "history": task_selectors.task_history(task=task)}
    return render(request, "review/task_edit.html", context, status=400 if form.errors else 200)


@require_POST
@require_role(Role.REVIEWER)
def task_flag_post(request: HttpRequest, pk: int) -> HttpResponse:
    task = get_object_or_404(Task.objects.select_related("site"), pk=pk)
    note = request.POST.get("note", "")
    if task_flag(task=task, note=note, user=request.user):
        messages.success(request, f"Flagged {task.task_id}." if task.review_flag else f"Unflagged {task.task_id}.")
    return redirect(_back(request, task.site))


@require_GET
@require_role(Role.REVIEWER)
def proposal_batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_object_or_404(ProposalBatch.objects.select_related("site", "pipeline_run"), pk=pk)
    context = {"batch": batch, "tasks": batch.tasks.order_by("pk"), "rules_label": RULES_LABEL}
    return render(request, "review/proposal_batch.html", context)
