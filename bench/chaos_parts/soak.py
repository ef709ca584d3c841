"""The chaos soak itself (bench/chaos.py parses the command line, makes the database and calls `Soak.run`): the data
it works on, the load and the faults on their schedule, the drain, the checks and the report."""
from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path

from bench.chaos_parts.load import (
    LABEL_OK,
    ChaosReviewer,
    PipelineDriver,
    Seen,
    judgments_check,
    labels_check,
    runs_check,
)
from bench.chaos_parts.services import Fault, Services, faults, schedule
from bench.serve import _episode_fields, _fill, _reviewers

REVIEW_RUN = "chaos-review"
ATTEMPT_TASKS = 6
UNREAD_SECONDS = 5  # an answer sent this shortly before its worker was SIGKILLed may never have been read


class Soak:
    def __init__(self, args, folder: Path, fake, secret_key: str) -> None:
        self.args, self.folder, self.fake = args, folder, fake
        self.seconds = args.minutes * 60
        self.services = Services(folder, env=dict(os.environ), redis_port=args.redis_port, web_port=args.web_port,
                                 web_workers=args.web_workers, secret_key=secret_key)
        self.seen = Seen()
        self.tries: list[dict] = []  # per fault tried: its kind, when it began and ended (monotonic and wall)

    # ── the data ────────────────────────────────────────────────────────────────────────────────────────────
    def fill(self) -> dict:
        """The review queue, the reviewers, the runs to judge, a run to export and a tasks file to attempt."""
        minutes = max(1.0, self.args.minutes)
        queue = _fill(int(1000 + 500 * minutes), run_name=REVIEW_RUN)
        names = _reviewers(self.args.reviewers)
        judge_runs = [_judge_run(f"chaos-judge-{n}", 300, n) for n in range(int(2 + minutes))]
        return {"queue": queue, "names": names, "judge_runs": judge_runs, "export": _export_run(self.folder),
                "tasks_file": _tasks_file(self.folder)}

    def starts(self, data: dict) -> dict:
        from taskgen.engine.control import run_start

        def judge(n: int):
            runs = data["judge_runs"]
            return run_start(stage="judge", params={"run": runs[n].pk, "provider": "gemini"}) if n < len(runs) else None

        def attempt(n: int):
            return run_start(stage="attempt", params={"tasks_file": str(data["tasks_file"]), "agent": "scripted",
                                                      "name": f"chaos-attempt-{n}", "mistakes": 0.3, "seed": n})

        def export(n: int):
            run, config = data["export"]
            return run_start(stage="export", params={"run": run.pk, "source": "judge", "judge_config": config.pk,
                                                     "budget": 10_000, "out_dir": f"chaos-exports/{n}"})

        return {"judge": judge, "attempt": attempt, "export": export}

    # ── the soak ────────────────────────────────────────────────────────────────────────────────────────────
    def run(self) -> int:
        data = self.fill()
        self.services.start_all()
        start = self.start = time.monotonic()
        deadline = self.deadline = start + self.seconds
        reviewers = [ChaosReviewer(self.services.base_url, name, data["queue"].pk, deadline, self.seen,
                                   self.args.think, self.args.seed * 100 + n) for n, name in enumerate(data["names"])]
        driver = PipelineDriver(starts=self.starts(data), deadline=deadline)
        for thread in [*reviewers, driver]:
            thread.start()
        rng = random.Random(self.args.seed)
        planned = [] if self.args.no_faults else schedule(faults(), seconds=self.seconds, seed=self.args.seed)
        for at, fault in planned:
            time.sleep(max(0.0, start + at - time.monotonic()))
            self.inject(fault, rng)
        for thread in [*reviewers, driver]:
            thread.join(max(1.0, deadline - time.monotonic() + 40))
        self.drain(driver.started)
        return self.report(driver, data, start)

    def inject(self, fault: Fault, rng: random.Random) -> None:
        began, wall = time.monotonic(), time.time()
        error = ""
        try:
            fault.do(self.services, rng)
        except Exception as exc:  # noqa: BLE001  (a fault that could not be done is reported, the soak goes on)
            error = f"{type(exc).__name__}: {exc}"
        self.tries.append({"fault": fault.name, "began": began, "ended": time.monotonic(), "wall": wall,
                           "error": error})
        print(f"  {began - self.start:6.0f} s  {fault.name}"
              f"{'  (could not: ' + error + ')' if error else ''}", flush=True)

    def drain(self, started: list[int]) -> None:
        """Every process up again, then the runs get --drain seconds to finish."""
        from django.db import connection

        from taskgen.models import PipelineRun

        for role, process in self.services.roles.items():
            if process.poll() is not None:
                print(f"  {role} had stopped by itself (exit {process.returncode}): started again", flush=True)
                self.services.start(role)
        connection.close()
        deadline = time.monotonic() + self.args.drain
        while time.monotonic() < deadline:
            if not PipelineRun.objects.filter(pk__in=started).exclude(
                    status__in=["done", "failed", "cancelled"]).exists():
                return
            time.sleep(2)

    # ── the report ──────────────────────────────────────────────────────────────────────────────────────────
    def report(self, driver: PipelineDriver, data: dict, start: float) -> int:
        problems = {"label posts answered 2xx and stored with their history": labels_check(self.seen.label_posts),
                    "no episode with two judgments of one config": judgments_check(),
                    "every run finished or says why": runs_check(driver.started)}
        held = self.faults_held(start)
        posts = self.seen.label_posts
        print(f"label posts: {len(posts)}, answered 2xx: {sum(p['status'] == LABEL_OK for p in posts)}; reviewer "
              f"requests: {len(self.seen.requests)}, not answered as expected: "
              f"{sum(not ok for _, _, ok in self.seen.requests)}")
        statuses = Counter(str(p["status"]) for p in posts)
        failing = Counter(endpoint for _, endpoint, ok in self.seen.requests if not ok)
        print(f"label posts by answer: {dict(sorted(statuses.items()))}; requests not answered as expected, by "
              f"endpoint: {dict(failing)}")
        print(f"runs started: {_runs_summary(driver.started)}; driver errors: {len(driver.errors)}")
        twice = self.fake.paid_twice()
        kills = [(t["wall"], t["wall"] + t["ended"] - t["began"]) for t in self.tries
                 if t["fault"] == "SIGKILL judge worker"]
        unread = [r for r in twice
                  if any(began - UNREAD_SECONDS <= r["first_answered_at"] <= ended for began, ended in kills)]
        print(f"judge calls: {len(self.fake.requests)}; paid twice: {len(twice)}, of which {len(unread)} were "
              f"answered from {UNREAD_SECONDS} s before a judge worker was SIGKILLed to its restart (an answer in "
              f"the dead worker's socket, or sent to it as it died: never read)")
        self.paid_twice = [{"asked_again": r["at"], "answered": r["first_answered_at"], "unread": r in unread}
                           for r in twice]
        problems["no judge call paid twice for an answer the app had received"] = [
            f"{r['path']} asked again at {r['at']:.1f}, answered at {r['first_answered_at']:.1f}"
            for r in twice if r not in unread]
        print(f"{'fault':<36}{'tried':>6}{'held':>6}{'failed':>7}  reviewer requests failed in its windows; "
              f"seconds from the fault to the next label post answered 2xx")
        for name, row in held.items():
            print(f"{name:<36}{row['tried']:>6}{row['held']:>6}{row['failed']:>7}  {row['errors']} of "
                  f"{row['requests']}; {row['back']}{'  ' + '; '.join(row['why']) if row['why'] else ''}")
        for check, found in problems.items():
            print(f"check: {check}: {'passed' if not found else f'FAILED ({len(found)})'}")
            for line in found[:10]:
                print(f"    {line}")
        failed = any(problems.values()) or any(row["failed"] for row in held.values())
        print(f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end)")
        (self.folder / "chaos-report.json").write_text(json.dumps(
            {"held": held, "problems": problems, "tries": self.tries, "label_posts": posts,
             "paid_twice": self.paid_twice,
             "driver_errors": driver.errors}, indent=1, default=str))
        return 1 if failed else 0

    def faults_held(self, start: float) -> dict:
        """Per kind of fault: tried, held (within --recover seconds after it ended a label post was answered 2xx,
        and the pipeline settled a unit, or had nothing left to do), failed; the reviewers' failed requests between
        it and the next fault."""
        rows = {f.name: {"tried": 0, "held": 0, "failed": 0, "errors": 0, "requests": 0, "back": [], "why": []}
                for f in faults()}
        answered = sorted(p["at"] for p in self.seen.label_posts if p["status"] == LABEL_OK)
        ends = [t["began"] for t in self.tries[1:]] + [float("inf")] if self.tries else []
        for tried, window_end in zip(self.tries, ends, strict=True):
            row = rows[tried["fault"]]
            row["tried"] += 1
            window = [ok for at, _, ok in self.seen.requests if tried["began"] <= at < window_end]
            row["errors"] += sum(not ok for ok in window)
            row["requests"] += len(window)
            later = [at for at in answered if at >= tried["ended"]]
            row["back"].append(round(later[0] - tried["began"], 1) if later else None)
            missing = self.not_back(tried)
            row["held" if not missing else "failed"] += 1
            row["why"] += [f"at {tried['began'] - start:.0f} s: {m}" for m in missing]
        return rows

    def not_back(self, tried: dict) -> list[str]:
        """What had not come back within --recover seconds after the fault ended (the reviewers' posts are asked for
        only while the reviewers still had 10 s to post)."""
        until = tried["ended"] + self.args.recover
        missing = [tried["error"]] if tried["error"] else []
        posted = any(p["status"] == LABEL_OK and tried["ended"] <= p["at"] < until for p in self.seen.label_posts)
        if not posted and tried["ended"] < self.deadline - 10:
            missing.append("no label post answered 2xx after it")
        if not _pipeline_moved(tried["wall"] + (tried["ended"] - tried["began"]), self.args.recover):
            missing.append("no unit settled after it while a run was open")
        return missing


def _pipeline_moved(since_wall: float, seconds: float) -> bool:
    """A unit settled within `seconds` after `since_wall`, or no run was open then."""
    from datetime import UTC, datetime, timedelta

    from django.db.models import Q

    from taskgen.models import PipelineRun, WorkUnit

    since = datetime.fromtimestamp(since_wall, tz=UTC)
    until = since + timedelta(seconds=seconds)
    if WorkUnit.objects.filter(finished_at__gte=since, finished_at__lt=until).exists():
        return True
    return not PipelineRun.objects.filter(created_at__lt=since).filter(
        Q(finished_at__isnull=True) | Q(finished_at__gt=until)).exists()


def _runs_summary(pks: list[int]) -> str:
    from collections import Counter

    from taskgen.models import PipelineRun

    counts = Counter(PipelineRun.objects.filter(pk__in=pks).values_list("stage", "status"))
    return ", ".join(f"{stage} {status}: {n}" for (stage, status), n in sorted(counts.items())) or "none"


def _judge_run(name: str, episodes: int, seed: int):
    """A run of recorded episodes, each its own request to the judge (nothing comes from the cache)."""
    from taskgen.models import Episode, Run, Site, Task

    site, _ = Site.objects.get_or_create(slug="chaos-shop", defaults={"name": "Chaos shop"})
    run = Run.objects.create(name=name)
    tasks = Task.objects.bulk_create(
        Task(task_id=f"{name}-{n:04d}", site=site, instruction=f"Buy {n % 7 + 1} mugs for order {seed}-{n}",
             task_kind="action") for n in range(episodes))
    Episode.objects.bulk_create(Episode(run=run, task=t, site=site, task_kind="action", task_order=n,
                                        **_episode_fields(seed * 10_000 + n)) for n, t in enumerate(tasks))
    return run


def _export_run(folder: Path):
    """A run in the reference's files with rows and a judge dir, loaded as an import would: what each export
    writes."""
    from taskgen.models import JudgeConfig
    from tests.runfiles import HandTask, load_run_dir, write_run_dir

    hand = [HandTask(site, n, rows=1 + (n % 3)) for n in range(1, 21) for site in ("alpha", "beta", "gamma")]
    config, _ = JudgeConfig.objects.get_or_create(provider="gemini", model="gemini-3.5-flash",
                                                  prompt_version="reference", image_policy="default")
    return load_run_dir(*write_run_dir(folder / "data" / "chaos-export-src", hand), config=config), config


def _tasks_file(folder: Path) -> Path:
    """The first sandbox tasks, to attempt again and again."""
    from sandbox.catalog import sandbox_tasks

    path = folder / "data" / "chaos-tasks.jsonl"
    path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in sandbox_tasks()[:ATTEMPT_TASKS]),
                    encoding="utf-8")
    return path
