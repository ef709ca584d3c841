"""The chaos soak's load (bench/chaos.py): reviewers who label over HTTP, and a driver that keeps a judge run, an
attempt run and an export run going; and the checks at the end (nothing lost, nothing doubled, every run finished
or says why)."""
from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import requests

from bench.serve import PASSWORD, Reviewer

VERDICTS = ["SUCCESS", "NOT SUCCESS", "UNSURE"]
LABEL_OK = 200


@dataclass
class Seen:
    """What the reviewers saw: every request (when, what, whether it answered as it should) and every label post
    (its episode, reviewer, verdict, unique note and HTTP status, None when no answer came)."""

    requests: list[tuple[float, str, bool]] = field(default_factory=list)
    label_posts: list[dict] = field(default_factory=list)


class ChaosReviewer(Reviewer):
    """Takes the next item of the queue, opens it, reads it for a while, labels it (and now and then changes the
    label at once); logs in again every so often (a login must work whatever is down); never gives up on an error.
    """

    def __init__(self, base: str, name: str, queue_pk: int, deadline: float, seen: Seen, think: float,
                 seed: int) -> None:
        super().__init__(base, name, queue_pk, deadline, [], think)
        self.seen, self.rng, self.logged_in_at = seen, random.Random(seed), -1e9

    def ask(self, endpoint: str, method: str, path: str, ok_status: int, **kwargs) -> requests.Response | None:
        asked = time.monotonic()  # a request counts in the fault window it was asked in
        try:
            response = self.http.request(method, f"{self.base}{path}", timeout=30, allow_redirects=False, **kwargs)
            ok = response.status_code == ok_status
        except requests.RequestException:
            response, ok = None, False
        self.seen.requests.append((asked, endpoint, ok))
        return response if ok else None

    def log_in(self) -> bool:
        self.http.cookies.clear()
        page = self.ask("login page", "GET", "/accounts/login/", 200)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text) if page is not None else None
        done = token and self.ask("login", "POST", "/accounts/login/", 302,
                                  data={"username": self.name, "password": PASSWORD,
                                        "csrfmiddlewaretoken": token.group(1)})
        if done is not None and done is not False:
            self.logged_in_at = time.monotonic()
            return True
        return False

    def run(self) -> None:
        time.sleep(self.rng.uniform(0, self.think))
        while time.monotonic() < self.deadline:
            if time.monotonic() - self.logged_in_at > 60 and not self.log_in():
                time.sleep(1)
                continue
            if not self.review_one():
                time.sleep(0.5)

    def review_one(self) -> bool:
        headers = {"X-CSRFToken": self.http.cookies.get("csrftoken", "")}
        taken = self.ask("take next", "POST", f"/queues/{self.queue_pk}/next/", 302, headers=headers)
        if taken is None or "/episodes/" not in taken.headers.get("Location", ""):
            return False
        url = taken.headers["Location"]
        if self.ask("episode page", "GET", url, 200) is None:
            return False
        episode = int(url.split("/episodes/")[1].split("/")[0])
        time.sleep(self.rng.uniform(0.5, 1.5) * self.think)
        verdict = self.rng.choice(VERDICTS)
        if self.label(episode, verdict, headers) and self.rng.random() < 0.2:
            self.label(episode, self.rng.choice([v for v in VERDICTS if v != verdict]), headers)  # changed at once
        return True

    def label(self, episode: int, verdict: str, headers: dict) -> bool:
        note = f"chaos {uuid.uuid4().hex}"
        post = {"episode": episode, "reviewer": self.name, "verdict": verdict, "note": note, "at": time.monotonic()}
        try:
            response = self.http.post(f"{self.base}/episodes/{episode}/label/?queue={self.queue_pk}", timeout=30,
                                      allow_redirects=False, headers={**headers, "HX-Request": "true"},
                                      data={"verdict": verdict, "note": note})
            post["status"] = response.status_code
        except requests.RequestException as exc:
            post["status"], post["error"] = None, f"{type(exc).__name__}: {exc}"[:300]
        self.seen.label_posts.append(post)
        self.seen.requests.append((post["at"], "label", post["status"] == LABEL_OK))
        return post["status"] == LABEL_OK


class PipelineDriver(threading.Thread):
    """Keeps one run of each stage going until the deadline: when a stage's run finishes, the next one starts (a
    judge run on the next unjudged run, an attempt under a new name, an export to a new folder), a minute at least
    after the one before."""

    def __init__(self, *, starts: dict, deadline: float, spacing: float = 60) -> None:
        super().__init__(daemon=True)
        self.spacing = spacing  # seconds at least between two starts of one stage (an export takes seconds)
        self.starts, self.deadline = starts, deadline  # stage -> Callable[[int], PipelineRun | None] (n-th start)
        self.started: list[int] = []
        self.errors: list[str] = []

    def run(self) -> None:
        from django.db import connection

        current: dict[str, int | None] = dict.fromkeys(self.starts)
        counts: dict[str, int] = defaultdict(int)
        last: dict[str, float] = defaultdict(lambda: -1e9)
        while time.monotonic() < self.deadline:
            try:
                for stage, start in self.starts.items():
                    due = time.monotonic() - last[stage] >= self.spacing
                    if due and (current[stage] is None or _finished(current[stage])):
                        last[stage] = time.monotonic()
                        pipeline_run = start(counts[stage])
                        counts[stage] += 1
                        current[stage] = pipeline_run.pk if pipeline_run else -1
                        if pipeline_run:
                            self.started.append(pipeline_run.pk)
            except Exception as exc:  # noqa: BLE001  (the database went away: try again on a new connection)
                self.errors.append(f"{type(exc).__name__}: {exc}")
                connection.close()
            time.sleep(2)
        connection.close()


def _finished(pk: int) -> bool:
    from taskgen.models import PipelineRun

    return pk < 0 or PipelineRun.objects.get(pk=pk).is_finished


# ── the checks ─────────────────────────────────────────────────────────────────────────────────────────────────

def labels_check(posts: list[dict]) -> list[str]:
    """Every label post answered 2xx is stored with its history: its note is in the label's changes, in the order
    posted; the label now holds the last post answered 2xx, or a later one whose answer never came."""
    from django.contrib.auth import get_user_model

    from taskgen.models import Label, LabelChange

    users = dict(get_user_model().objects.filter(username__in={p["reviewer"] for p in posts})
                 .values_list("username", "pk"))
    history: dict[tuple[int, int], list[str]] = defaultdict(list)
    for episode, user, after in (LabelChange.objects.filter(label__reviewer__in=users.values())
                                 .order_by("changed_at", "pk").values_list("label__episode", "label__reviewer",
                                                                            "after")):
        history[(episode, user)].append(after.get("note", ""))
    now = {(e, u): n for e, u, n in Label.objects.filter(reviewer__in=users.values())
           .values_list("episode", "reviewer", "note")}
    problems = []
    by_label: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for post in sorted(posts, key=lambda p: p["at"]):
        by_label[(post["episode"], users[post["reviewer"]])].append(post)
    for key, tried in by_label.items():
        answered = [p["note"] for p in tried if p["status"] == LABEL_OK]
        notes = iter(history.get(key, []))
        if not all(note in notes for note in answered):  # a subsequence, in order
            problems.append(f"episode {key[0]}, {tried[0]['reviewer']}: answered posts {answered} not all in the "
                            f"history {history.get(key, [])}")
            continue
        last_ok = max((n for n, p in enumerate(tried) if p["status"] == LABEL_OK), default=None)
        if last_ok is None:
            continue
        allowed = {tried[last_ok]["note"]} | {p["note"] for p in tried[last_ok + 1:] if p["status"] != LABEL_OK}
        if now.get(key) not in allowed:
            problems.append(f"episode {key[0]}, {tried[0]['reviewer']}: the label holds {now.get(key)!r}, not the "
                            f"last answered post {tried[last_ok]['note']!r}")
    return problems


def judgments_check() -> list[str]:
    """No episode has two judgments of one judge config."""
    from django.db.models import Count

    from taskgen.models import Judgment

    twice = Judgment.objects.values("episode", "config").annotate(n=Count("pk")).filter(n__gt=1)
    return [f"episode {row['episode']} has {row['n']} judgments of config {row['config']}" for row in twice]


def runs_check(pks: list[int]) -> list[str]:
    """Every run finished (every unit done or failed, the counts adding up), or says why it did not."""
    from taskgen.models import PipelineRun

    problems = []
    for pipeline_run in PipelineRun.objects.filter(pk__in=pks).order_by("pk"):
        name = f"{pipeline_run.stage} run {pipeline_run.pk}"
        open_units = pipeline_run.units.filter(status__in=["queued", "running"]).count()
        if not pipeline_run.is_finished or open_units:
            problems.append(f"{name} is {pipeline_run.status} with {open_units} units open after the drain")
        elif pipeline_run.status != "done" or pipeline_run.failed:
            why = pipeline_run.errors or list(pipeline_run.units.exclude(last_error="").filter(status="failed")
                                              .values_list("last_error", flat=True)[:3])
            if not why:
                problems.append(f"{name} is {pipeline_run.status} ({pipeline_run.failed} failed) without a reason")
        elif pipeline_run.done != pipeline_run.total:
            problems.append(f"{name} is done with {pipeline_run.done} of {pipeline_run.total} units")
    return problems
