"""The episode page as a review workbench, and the label and adjudication posts made from it."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from review import workbench
from review.episode_outcome import in_sandbox, time_lines, verifier_view
from review.models import Queue, Reservation
from review.page_text import CELL_SHOWN, episode_whole_text, page_text
from review.reviewer_quality import verifier_hidden
from review.services import label_set
from review.workbench_steps import agent_run, episode_steps, screen_text_kind
from taskgen.labels.fields import NOTE_MAX, REASON_MAX, TAG_MAX, TAGS_MAX, ReviewError
from taskgen.labels.quality import reviewers_below
from taskgen.labels.rule import UNSURE_RULE, final_label_state
from taskgen.labels.write import final_label_adjudicate
from taskgen.models import Episode, LabelVerdict
from taskgen.roles import Role, has_role, require_role
from taskgen.text_input import field_refused

SUGGESTED_TAGS = ["side effect missed", "wrong answer accepted", "evidence misread", "partial task", "judge too strict"]


def _queue_from(request: HttpRequest) -> Queue | None:
    raw = request.GET.get("queue") or request.POST.get("queue") or ""
    # a sane length first: a 30-digit id would overflow PostgreSQL's bigint and fail as a 500
    return Queue.objects.filter(pk=int(raw)).first() if raw.isdigit() and len(raw) < 15 else None


def _episode_url(episode_id: int, queue: Queue | None) -> str:
    url = reverse("review:episode_detail", args=[episode_id])
    return f"{url}?queue={queue.pk}" if queue else url


def workbench_context(request: HttpRequest, episode: Episode, queue: Queue | None, *, evidence: bool = True) -> dict:
    """Everything the page and its partials render; blind queues hide the judge and other labels until you label.
    With `evidence=False` (the label panel alone) the steps, request log and changes are left out."""
    my_label = next((lb for lb in episode.label_list if lb.reviewer_id == request.user.pk), None)
    can_review = has_role(request.user, Role.REVIEWER)
    blind = bool(queue and queue.blind and can_review and my_label is None)
    hide_verifier = verifier_hidden(queue=queue, can_review=can_review, labelled=my_label is not None)
    reqs, chgs = (workbench.requests(episode), workbench.changes(episode)) if evidence else ([], [])
    step_actions, screens = episode_steps(episode) if evidence else ([], [])
    step_files = {s.name.lower(): s.step.number for s in screens if s.step}
    judged = workbench.judgments_with_citations(episode, reqs, chgs, step_files, cite=evidence)
    final = getattr(episode, "final_label", None)  # None when there is none (the related lookup raises)
    others = [lb for lb in episode.label_list if lb.reviewer_id != request.user.pk]
    # an adjudicator weighs each label: those of reviewers below the accuracy set for known-truth checks are flagged
    flagged = reviewers_below() if others and has_role(request.user, Role.ADJUDICATOR) else set()
    return {
        "episode": episode, "queue": queue, "blind": blind, "verifier_hidden": hide_verifier, "my_label": my_label,
        "other_labels": others, "flagged_reviewers": flagged, "min_accuracy": settings.REVIEWER_MIN_ACCURACY,
        "screens": screens, "step_actions": step_actions,
        "screen_text_kind": screen_text_kind(episode, screens, in_sandbox(episode)),
        "agent_run": agent_run(episode.extra), "time_lines": time_lines(episode),
        "verifier": verifier_view(episode), "in_sandbox": in_sandbox(episode),
        "requests": reqs, "noise_count": sum(r.is_noise for r in reqs), "changes": chgs, "judged": judged,
        "primary": _primary_judgment(judged, queue),
        "final_state": final_label_state(final=final, verdicts=[lb.verdict for lb in episode.label_list]),
        "unsure_rule": UNSURE_RULE,
        "verdict_choices": LabelVerdict.choices, "suggested_tags": SUGGESTED_TAGS,
        "caps": {"note": NOTE_MAX, "tag": TAG_MAX, "tags": TAGS_MAX, "reason": REASON_MAX},
        "episode_url": _episode_url(episode.pk, queue),
        "answer": page_text(episode.answer or "") if evidence else None, "cell_shown": CELL_SHOWN,
        "screen_text": page_text(episode.last_screen_text) if evidence else None,
    }


def _primary_judgment(judged: list[dict], queue: Queue | None) -> dict | None:
    """The judgment whose parts a label's part_overrides point into: the queue's judge config's, else the first."""
    wanted = queue.judge_config_id if queue else None
    return next((j for j in judged if j["judgment"].config_id == wanted), judged[0] if judged else None)


def _reservation(queue: Queue | None, episode: Episode) -> Reservation | None:
    if queue is None:
        return None
    live = Reservation.objects.filter(queue=queue, episode=episode, expires_at__gt=timezone.now())
    return live.select_related("reviewer").first()


@require_GET
@require_role(Role.VIEWER)
def episode_detail(request: HttpRequest, pk: int) -> HttpResponse:
    episode, queue = workbench.episode_for_workbench(pk), _queue_from(request)
    context = workbench_context(request, episode, queue)
    context["reservation"] = _reservation(queue, episode)
    return render(request, "review/episode_detail.html", context)


@require_GET
@require_role(Role.VIEWER)
def episode_text(request: HttpRequest, pk: int, part: str) -> HttpResponse:
    """One of the episode's long texts whole (its answer, its last screen's text, its request log or data changes)
    as plain text: the page shows their first characters."""
    episode = get_object_or_404(Episode.objects.only("id", "answer", "screen_text", "request_log", "data_changes"),
                                pk=pk)
    text = episode_whole_text(episode=episode, part=part)
    if text is None:
        raise Http404(f"an episode has no text called {part!r}")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


def _parse_label_form(post) -> dict:
    parts = [int(p) for p in post.getlist("part_overrides") if p.isdigit()]
    tags = [t for t in post.get("tags", "").split(",")] + post.getlist("tag")
    return {"verdict": post.get("verdict", ""), "part_overrides": parts, "note": post.get("note", ""), "tags": tags}


@require_POST
@require_role(Role.REVIEWER)
def label_post(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the reviewer's label: htmx gets the label panel back (and the judge panel if it was hidden); a plain
    form post is redirected back to the page."""
    episode = get_object_or_404(Episode.objects.only("id"), pk=pk)  # the label needs its id; the panel reads the rest
    queue = _queue_from(request)
    error = ""
    try:
        label_set(episode=episode, reviewer=request.user, **_parse_label_form(request.POST))
    except ReviewError as exc:
        if exc.field and not request.htmx:  # what the form never sends (it caps its lengths); htmx: the panel says
            return field_refused(request, message=str(exc))
        error = str(exc)
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(_episode_url(pk, queue))
    # the judge panel (or its verifier, in a queue that mixes checks) was hidden: send it along, with its evidence links
    reveal = bool(queue and (queue.blind or queue.check_rate > 0))
    episode = workbench.episode_for_workbench(pk, evidence=reveal)
    context = workbench_context(request, episode, queue, evidence=reveal)
    context.update(label_error=error, reveal=reveal)
    # 200 even on a refused label: htmx swaps only 2xx answers, and the panel is where the reviewer reads why
    return render(request, "review/_label_response.html", context)


@require_POST
@require_role(Role.ADJUDICATOR)
def adjudicate_post(request: HttpRequest, pk: int) -> HttpResponse:
    episode = get_object_or_404(Episode, pk=pk)
    try:
        final_label_adjudicate(episode=episode, adjudicator=request.user, verdict=request.POST.get("verdict", ""),
                               reason=request.POST.get("reason", ""))
        messages.success(request, "Final label set.")
    except ReviewError as exc:
        if exc.field:
            return field_refused(request, message=str(exc))
        messages.error(request, str(exc))
    return redirect(request.POST.get("next_page") == "adjudication" and reverse("review:adjudication")
                    or _episode_url(pk, _queue_from(request)))
