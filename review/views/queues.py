"""Review queues: the list with progress, one queue's page, taking the next item, stepping back, and the
adjudication list of episodes whose labels disagree."""
from __future__ import annotations

from django.contrib import messages
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from review import queues
from review.certify_queue import certify_queue_certificate
from review.models import Queue, Reservation
from review.reviewer_quality import queue_check_rate_set
from review.services import (
    queue_create_from_episodes,
    queue_create_from_filters,
    queue_create_sample,
    queue_take_next,
    queues_builtin_ensure,
    reservation_release,
)
from review.views.reviewers import accuracy_chosen
from taskgen.labels.fields import QUEUE_NAME_MAX, ReviewError
from taskgen.labels.quality import QualityError, reviewer_accuracy
from taskgen.labels.rule import UNSURE_RULE, final_label_state, needs_adjudication
from taskgen.models import Episode, Label, LabelVerdict
from taskgen.roles import Role, require_role
from taskgen.stages.certify.service import SOURCES as CERTIFY_SOURCES
from taskgen.text_input import field_refused
from taskgen.triage.filters import describe, filter_form_choices
from taskgen.triage.risk import RISK_NAMES, RISK_WORDS, risk_reasons


@require_GET
@require_role(Role.VIEWER)
def queue_list(request: HttpRequest) -> HttpResponse:
    queues_builtin_ensure()
    # Progress is counted per queue by `queue_progress_cell`, loaded by htmx: on a large database each count takes
    # a scan, and the list should show at once.
    all_queues = list(Queue.objects.select_related("judge_config", "run").order_by("-run__created_at", "run_id",
                                                                                    "-builtin", "name", "id"))
    context = {"builtin_by_run": _by_run([q for q in all_queues if q.builtin]),
               "saved": [q for q in all_queues if not q.builtin], **filter_form_choices(),
               "queue_name_max": QUEUE_NAME_MAX}
    return render(request, "review/queue_list.html", context)


def _by_run(builtin: list[Queue]) -> list[tuple]:
    runs: dict[int, tuple] = {}
    for queue in builtin:
        runs.setdefault(queue.run_id, (queue.run, []))[1].append(queue)
    return list(runs.values())


def _int(value: str | None, default: int) -> int:
    """A form's whole number; anything else (or one long enough to overflow the database) is the default."""
    return int(value) if str(value).isdigit() and len(str(value)) < 15 else default


def _queue_options(request: HttpRequest, *, default_name: str) -> dict:
    """What every queue form sets: name, who made it, K labels per episode, blind or not."""
    post = request.POST
    return {"name": post.get("name") or default_name, "user": request.user,
            "labels_needed": _int(post.get("labels_needed"), 1), "blind": post.get("blind") == "on"}


def _create_and_open(request: HttpRequest, create, **kwargs) -> HttpResponse:
    """Make a queue with `create` and open it; a refused queue goes back to the list with the reason."""
    try:
        queue = create(**kwargs)
    except ReviewError as exc:
        if exc.field:
            return field_refused(request, message=str(exc))
        messages.error(request, str(exc))
        return redirect("review:queue_list")
    return redirect(queue)


@require_POST
@require_role(Role.REVIEWER)
def queue_create(request: HttpRequest) -> HttpResponse:
    post = request.POST
    common = {**_queue_options(request, default_name=""), "judge_config_id": _int(post.get("judge_config"), 0) or None,
              "filters": post}
    if post.get("kind") == "sample":
        return _create_and_open(request, queue_create_sample, per_verdict=_int(post.get("per_verdict"), 0), **common)
    return _create_and_open(request, queue_create_from_filters, kind=post.get("kind") or Queue.Kind.FILTER, **common)


@require_GET
@require_role(Role.VIEWER)
def queue_progress_cell(request: HttpRequest, pk: int) -> HttpResponse:
    """One queue's progress for the queue list (a line) or the queue's page (`?detail=1`: counts and per reviewer),
    an htmx partial loaded after the page: counting a large queue takes a scan the page should not wait for."""
    queue = get_object_or_404(Queue, pk=pk)
    template = "review/_queue_detail_progress.html" if request.GET.get("detail") else "review/_queue_progress.html"
    return render(request, template, {"queue": queue, "progress": queues.queue_progress(queue)})


@require_POST
@require_role(Role.REVIEWER)
def queue_from_episodes(request: HttpRequest) -> HttpResponse:
    """Make a queue of exactly the posted episodes (`episode_ids`, repeated or comma separated) and open it; the
    validate page posts its false positives here."""
    raw = request.POST.getlist("episode_ids")
    ids = [_int(i.strip(), 0) for value in raw for i in value.split(",") if i.strip()]
    return _create_and_open(request, queue_create_from_episodes, episode_ids=ids,
                            **_queue_options(request, default_name="Episodes to review"))


@require_GET
@require_role(Role.VIEWER)
def queue_detail(request: HttpRequest, pk: int) -> HttpResponse:
    queue = get_object_or_404(Queue.objects.select_related("judge_config", "run"), pk=pk)
    open_episodes = queues.queue_open(queue).select_related("task", "site", "run").only(
        "id", "task__task_id", "task__instruction", "site__slug", "run__name")
    upcoming = queues.queue_first(queue, open_episodes, 50)
    held = dict(Reservation.objects.filter(queue=queue, episode__in=[e.pk for e in upcoming])
                .values_list("episode_id", "reviewer__username"))
    reasons = risk_reasons([e.pk for e in upcoming], queue.judge_config_id, verifier=not queue.check_rate)
    for episode in upcoming:
        episode.held_by, episode.reasons = held.get(episode.pk), reasons.get(episode.pk, [])
    context = {"queue": queue, "upcoming": upcoming,
               "filter_words": describe(queues.queue_filter(queue)),
               "risk_ordered": queue.kind == Queue.Kind.FALSE_POSITIVE}
    if queue.kind == Queue.Kind.CERTIFY:
        context.update(cert=certify_queue_certificate(queue, cuts=True), certify_sources=CERTIFY_SOURCES,
                       certify_risks=[(name, RISK_WORDS[name]) for name in RISK_NAMES])
    return render(request, "review/queue_detail.html", context)


@require_POST
@require_role(Role.ADJUDICATOR)
def queue_check_rate(request: HttpRequest, pk: int) -> HttpResponse:
    """Set the share of the queue's served items that are known-truth checks (adjudicators: reviewer quality)."""
    queue = get_object_or_404(Queue, pk=pk)
    try:
        queue_check_rate_set(queue=queue, rate=request.POST.get("check_rate", ""))
    except QualityError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Known-truth checks: {queue.check_rate:.0%} of the items served from this queue."
                         if queue.check_rate else "This queue serves no known-truth checks.")
    return redirect(queue)


@require_POST
@require_role(Role.REVIEWER)
def queue_next(request: HttpRequest, pk: int) -> HttpResponse:
    """Reserve the next item for this reviewer and open it; back to the queue page when nothing is left."""
    queue = get_object_or_404(Queue, pk=pk)
    skip = _int(request.POST.get("skip"), 0) or None
    episode = queue_take_next(queue=queue, reviewer=request.user, skip=skip)
    if episode is None:
        messages.info(request, "Nothing left for you in this queue: every episode has its labels or is taken.")
        return redirect(queue)
    return redirect(f"{reverse('review:episode_detail', args=[episode.pk])}?queue={queue.pk}")


@require_GET
@require_role(Role.VIEWER)
def queue_previous(request: HttpRequest, pk: int, episode_pk: int) -> HttpResponse:
    """The episode you labelled in this queue just before this one (P), or the queue page at the start."""
    queue = get_object_or_404(Queue, pk=pk)
    mine = Label.objects.filter(reviewer=request.user, episode__in=queues.queue_scope(queue).order_by().values("pk"))
    current = mine.filter(episode_id=episode_pk).values_list("created_at", flat=True).first()
    earlier = mine.exclude(episode_id=episode_pk)
    if current:
        earlier = earlier.filter(created_at__lt=current)
    previous = earlier.order_by("-created_at", "-id").values_list("episode_id", flat=True).first()
    if previous is None:
        messages.info(request, "This is the first episode you labelled in this queue.")
        return redirect(queue)
    return redirect(f"{reverse('review:episode_detail', args=[previous])}?queue={queue.pk}")


@require_POST
@require_role(Role.REVIEWER)
def queue_release(request: HttpRequest, pk: int) -> HttpResponse:
    queue = get_object_or_404(Queue, pk=pk)
    count = reservation_release(queue=queue, reviewer=request.user)
    messages.info(request, f"Released {count} reserved episode(s).")
    return redirect(queue)


@require_GET
@require_role(Role.ADJUDICATOR)
def adjudication(request: HttpRequest) -> HttpResponse:
    """Episodes whose labels disagree (or are all unsure) and that no adjudicator has settled yet; the labels of
    reviewers below the accuracy chosen (`?accuracy=`, on known-truth checks) are flagged."""
    threshold, basis, error = accuracy_chosen(request)
    rows = reviewer_accuracy(intervals=basis == "upper")
    below = {row.reviewer_id: row for row in rows if row.below(threshold, basis)}
    labels = Label.objects.select_related("reviewer").only("episode_id", "verdict", "reviewer__username")
    episodes = list(Episode.objects.filter(needs_adjudication()).select_related("task", "site", "run")
                    .prefetch_related(Prefetch("labels", queryset=labels, to_attr="label_list"))
                    .order_by("id")[:200])
    for episode in episodes:
        verdicts = [label.verdict for label in episode.label_list]
        episode.n_success, episode.n_not, episode.n_unsure = (verdicts.count(v) for v in LabelVerdict.values)
        episode.state = final_label_state(final=None, verdicts=verdicts)
        episode.flagged = [(label, below[label.reviewer_id]) for label in episode.label_list
                           if label.reviewer_id in below]
    return render(request, "review/adjudication.html", {"episodes": episodes, "unsure_rule": UNSURE_RULE,
                                                         "threshold": threshold, "basis": basis, "error": error,
                                                         "flagged_reviewers": len(below)})
