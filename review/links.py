"""Links from one page family to another: the validate page's "review these" and its random-sample estimate."""
from __future__ import annotations

from collections.abc import Sequence

from django.urls import reverse

from review.models import Queue
from review.queues import sample_episode_ids


def review_queue_url_for(episode_ids: Sequence[int]) -> str | None:
    """Where to POST these episode ids to make a review queue of them (None when there are none: the link hides)."""
    return reverse("review:queue_from_episodes") if episode_ids else None


def random_sample_episodes(runs) -> set[int] | None:
    """The newest random-sample queue's episodes over these runs, or None when no such queue exists (the validate
    page then estimates from the labels the certify design drew)."""
    run_ids = {run.pk for run in runs}
    for queue in Queue.objects.filter(kind=Queue.Kind.SAMPLE).order_by("-pk")[:20]:
        scoped = {int(r) for r in (queue.filters or {}).get("runs") or []}
        if not scoped or scoped <= run_ids:
            return sample_episode_ids(queue)
    return None
