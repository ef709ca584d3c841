"""Links from one page family to another that are wired at merge time."""
from __future__ import annotations

from collections.abc import Sequence


def review_queue_url_for(episode_ids: Sequence[int]) -> str | None:
    """The URL of a review queue made of these episodes, or None while no queue page exists (pages hide the link).

    The review workbench wires this to its queue (e.g. a queue created from the ids, or a filter URL).
    """
    return None


def random_sample_episodes(runs) -> object | None:
    """The episodes of the runs' random-sample review queue (a queryset or ids), or None while no such queue exists.

    None makes the validate page estimate from every episode with a final label; the review workbench wires this to
    its random-sample queue so the estimate rests on a truly random sample.
    """
    return None
