"""Judge benchmark on real data: episodes copied from the sandbox harness's run (real 1280x800 screenshots, every one
distinct: bench/real_screens.py), imported, then judged by the gemini judge against a fake Gemini (300 ms a call)
with 16 calls in flight, on PostgreSQL when DATABASE_URL names one (a fresh database `<name>_bench_judge` beside it),
else SQLite in a temporary folder. Prints, with the machine's load beside each:

  - as users run it (the figures): `python manage.py taskgen judge RUN --workers 16`, a whole process (Python's start
    and Django's setup included), its wall time, episodes/s against the ideal (16 / 0.3 s; target 90%) and CPU per
    judgment from os.wait4 (the process and its children; target: at most 12 ms, 5x less than the reference's); two
    processes working one run (`taskgen resume PIPELINE_RUN --workers 16` twice at once, as a second machine joins;
    target: 1.8x one when the fake is not the limit) with the fake's own CPU; with --reference the reference's own
    `judge` command on the same run dir (bench/judge_reference.py), side by side in one table (bench/judge_process.py),
    each once the machine is quiet again (bench/cpu.py machine_settle: a 2 s window under 10% busy, the diagnosis's
    or the previous measurement's work, PostgreSQL's autovacuum after it, ended); and each whole process's wall
    split by the fake's window of calls (its first call's arrival, its last answer: bench/judge_process.py
    Timeline) into its start, its calls against their floor (the waves of `--latency`) and its end;
  - with --py-spy: one more `taskgen judge` process profiled by py-spy (every thread, CPU only; bench/py_spy.py);
  - diagnosis, in this process: a profile of judging (cProfile with a CPU clock, episodes judged one at a time) and
    the database queries per judgment; episodes/s and CPU per judgment of forked worker processes for each count in
    --processes (each with --concurrency threads);
  - image tokens per episode under the policy judged vs full-size images (target: at least 40% fewer);
  - the one-time cost, at import, of a downscaled copy (policy `small`, for providers without media_resolution);
  - with --celery (needs REDIS_URL): the same run judged by real Celery workers of the `judge` queue, started as
    `make demo` and docker-compose start them (thread pool, settings.JUDGE_THREADS), one process and then two, each
    up before its run starts: their rates beside --workers', and two workers' rate against one's.

    .venv/bin/python bench/judge.py [--episodes 560] [--concurrency 16] [--latency 0.3] [--processes 1,2] [--celery]
        [--reference]   # also the reference's own `judge` on the same run dir (bench/judge_reference.py)
        [--py-spy]      # also a py-spy profile of one `taskgen judge` process (pip install py-spy)

The final figures (a quiet machine, PostgreSQL, twice in a row; TASKGEN_REFERENCE when ../shared is not beside the
checkout, e.g. in a worktree):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/taskgen TASKGEN_REFERENCE=/work/shared/reference/taskgen.py \
        .venv/bin/python bench/judge.py --episodes 560 --reference
"""
from __future__ import annotations

import argparse
import cProfile
import io
import math
import multiprocessing
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORK = ROOT / "var" / "bench" / "judge"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="judge throughput, CPU and image-cost benchmark on real screenshots")
    parser.add_argument("--episodes", type=int, default=560)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--processes", default="1", help="worker process counts to run, e.g. 1,2")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads per process (default: as a judge worker, the calls in flight plus a few)")
    parser.add_argument("--policy", default="medium", help="image policy judged (default: medium)")
    parser.add_argument("--profile", type=int, default=60,
                        help="episodes judged one at a time under cProfile (0: no profile)")
    parser.add_argument("--full-sample", type=int, default=30, help="episodes also judged with full-size images")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--reference", action="store_true",
                        help="also judge the run dir with the reference's own `judge` (its shim), side by side")
    parser.add_argument("--py-spy", action="store_true",
                        help="also profile one `taskgen judge` process with py-spy (every thread, CPU only)")
    parser.add_argument("--celery", action="store_true",
                        help="also judge the run with a real Celery worker of the judge queue (needs REDIS_URL)")
    return parser.parse_args()


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}/{os.cpu_count()} CPUs"


def _fresh_postgres(url: str) -> str:
    """A new, empty database beside the one `url` names; its URL."""
    import psycopg

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'taskgen'}_bench_judge"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def _setup_django(tmp: Path, database_url: str, broker: str = "") -> None:
    os.environ.update({"TASKGEN_VAR_DIR": str(tmp), "TASKGEN_MEDIA_ROOT": str(tmp / "media"),
                       "DJANGO_SETTINGS_MODULE": "taskgen.settings", "GEMINI_API_KEY": "bench-key-not-real",
                       "TASKGEN_JUDGE_RPM": "1000000", "TASKGEN_JUDGE_RETRY_BASE": "0.05"})
    os.environ.pop("CELERY_BROKER_URL", None)  # work is done here; the embedded broker takes the engine's wake-ups
    if broker:
        os.environ["CELERY_BROKER_URL"] = broker  # --celery: the engine's wake-ups reach a real worker
    if database_url.startswith("postgres"):
        os.environ["DATABASE_URL"] = _fresh_postgres(database_url)
    else:
        os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _start_fake(latency: float) -> tuple[subprocess.Popen, str]:
    fake = subprocess.Popen([sys.executable, "-m", "tests.fakes.gemini_server", "--latency", str(latency)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return fake, fake.stdout.readline().strip()


def _import(episodes: int):
    """The corpus imported as one run; prints the import's cost per screenshot and that of the judge's copies."""
    from bench.real_screens import corpus_run_dir, harness_run_dir
    from taskgen.models import Run, Screenshot
    from taskgen.stages.import_.service import import_run_dir

    run_dir = corpus_run_dir(harness_run_dir(), WORK, episodes=episodes)
    started = time.perf_counter()
    import_run_dir(run_dir=run_dir, name="bench-judge")
    wall = time.perf_counter() - started
    run = Run.objects.get(name="bench-judge")
    shots = Screenshot.objects.filter(episode__run=run).count()
    print(f"import                   {run.episodes.count()} episodes, {shots} screenshots (all distinct) "
          f"in {wall:.1f} s ({load()})")
    _copy_cost(run)
    return run


def _copy_cost(run) -> None:
    from django.conf import settings

    from taskgen.blobs import blob_path
    from taskgen.models import Screenshot
    from taskgen.stages.judge.images import POLICIES, downscaled

    blobs = [s.blob for s in Screenshot.objects.filter(episode__run=run).select_related("blob")[:40]]
    copies = settings.JUDGE_IMAGE_COPIES or ()  # None: made only when the provider needs them
    for name in copies or ("small",):
        started = time.process_time()
        for blob in blobs:
            downscaled(blob_path(blob).read_bytes(), POLICIES[name])
        each = (time.process_time() - started) * 1000 / max(1, len(blobs))
        made = "made" if name in copies else "not made here; would cost"
        print(f"  copy `{name}`            {made} {each:.1f} ms CPU per screenshot, once, when stored "
              f"(TASKGEN_JUDGE_IMAGE_COPIES), never while judging")


def _profile(ids: list[int], config_id: int) -> None:
    """Judge `ids` one at a time under cProfile (CPU clock) and count their database queries."""
    from django.db import connection

    from taskgen.stages.judge.service import judge_episode

    judge_episode(episode_id=ids[0], config_id=config_id, in_worker=True)  # imports and the SDK client: once
    half = len(ids) // 2
    started = time.process_time()
    for episode_id in ids[1:half]:
        judge_episode(episode_id=episode_id, config_id=config_id, in_worker=True)
    plain = (time.process_time() - started) * 1000 / max(1, half - 1)
    print(f"judge_episode alone      {plain:.1f} ms CPU each, one at a time, no profiler ({load()})")
    ids = ids[half:]
    queries = []
    profiler = cProfile.Profile(time.process_time)
    with connection.execute_wrapper(lambda execute, sql, *a: queries.append(sql) or execute(sql, *a)):
        profiler.enable()
        for episode_id in ids:
            judge_episode(episode_id=episode_id, config_id=config_id, in_worker=True)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    total = stats.total_tt * 1000 / len(ids)
    print(f"profile                  {len(ids)} judgments one at a time: {total:.1f} ms CPU each in judge_episode, "
          f"{len(queries) / len(ids):.1f} database queries each ({load()})")
    stats.sort_stats("cumulative").print_stats(r"taskgen/|genai/models|psycopg|query\.py", 25)
    stats.sort_stats("tottime").print_stats(12)
    lines = [line for line in out.getvalue().splitlines() if line.strip() and "function calls" not in line]
    print("\n".join("    " + line.replace(str(ROOT) + "/", "").replace(sys.prefix, "") for line in lines))


def _threads(pipeline_run_id: int, threads: int) -> None:
    """One worker process: `threads` slots working the run's units through the engine, as a `judge` worker does."""
    from django.db import connection

    from taskgen.engine.worker import work

    def slot(n: int) -> None:
        try:
            while (again := work(pipeline_run_id=pipeline_run_id, owner=f"bench:{os.getpid()}:{n}")) is not None:
                time.sleep(min(again, 0.2))
        finally:
            connection.close()

    pool = [threading.Thread(target=slot, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def _close_connections() -> None:
    """Children must not share the parent's connections, nor its psycopg pool (whose threads a fork leaves behind)."""
    from django.db import connections

    for conn in connections.all():
        conn.close()
        if getattr(conn, "pool", None) is not None:
            conn.close_pool()


def _judge_run(run, config, concurrency: int, processes: int, threads: int = 0) -> tuple[int, float, float]:
    """Judge the run on the engine with `processes` forked workers, each keeping `concurrency` calls in flight with
    `threads` threads (0: as a judge worker does); (units, wall, CPU)."""
    from taskgen.concurrency import judge_threads_for
    from taskgen.engine.control import run_start
    from taskgen.models import PipelineRun
    from taskgen.stages.judge.in_flight import calls_in_flight_choose
    from taskgen.stages.judge.work import JudgeParams

    pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE,
                             params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))
    _close_connections()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    context = multiprocessing.get_context("fork")
    calls_in_flight_choose(concurrency)  # the forked workers inherit it
    workers = [context.Process(target=_threads, args=(pipeline_run.pk, threads or judge_threads_for(concurrency)))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return pipeline_run.total, wall, cpu


def _image_tokens(config, episode_ids: list[int]) -> float:
    """Image tokens per episode: the input tokens the fake counted less the text's (a token per 4 characters)."""
    from taskgen.models import Episode, Judgment
    from taskgen.stages.judge.service import judge_request_build

    judgments = Judgment.objects.filter(config=config, episode_id__in=episode_ids, source="judge")
    total = 0.0
    for judgment in judgments:
        built = judge_request_build(episode=Episode.objects.get(pk=judgment.episode_id), config=config)
        total += judgment.input_tokens - math.ceil((len(built.request.system) + len(built.request.prompt)) / 4)
    return total / max(1, len(judgments))


def _process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) a running process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_in_flight(url: str) -> int:
    """The most calls the fake answered at once since it started (it counts them itself)."""
    from bench.judge_process import fake_get

    return int(fake_get(url, "/_fake/in-flight")["peak"])


def _report(args, processes: int, judged: int, total: int, wall: float, cpu: float) -> float:
    from taskgen.concurrency import judge_threads_for

    ideal = processes * args.concurrency / args.latency
    threads = args.threads or judge_threads_for(args.concurrency)
    print(f"episodes judged          {judged} of {total} in {wall:.1f} s by {processes} process(es) of "
          f"{args.concurrency} calls in flight, {threads} threads ({load()})")
    print(f"  throughput             {total / wall:.1f} episodes/s; ideal {ideal:.1f}/s "
          f"({processes} x {args.concurrency} / {args.latency} s); ratio {total / wall / ideal:.1%} (a diagnosis)")
    print(f"  app CPU per judgment   {cpu * 1000 / total:.1f} ms (the forked judging processes: no Python start, "
          "no Django setup)")
    return total / wall


def main() -> None:
    args = _args()
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        broker = os.environ.get("REDIS_URL", "") if args.celery else ""
        if args.celery and not broker.startswith("redis"):
            raise SystemExit("--celery needs REDIS_URL (redis://127.0.0.1:6379/N): the worker is another process")
        _setup_django(Path(tmp), args.database_url, broker)
        fake, url = _start_fake(args.latency)
        try:
            from django.conf import settings
            from django.db import connection

            from bench.disk import machine_memory
            from taskgen.models import Judgment
            from taskgen.stages.judge.service import judge_config_for

            settings.GOOGLE_GEMINI_BASE_URL = url
            print(f"database                 {connection.vendor}; policy `{args.policy}`; fake Gemini {args.latency}s; "
                  f"memory: {machine_memory()}")
            run = _import(args.episodes)
            ids = list(run.episodes.order_by("task_order").values_list("pk", flat=True))
            if args.profile > 0:
                _profile(ids[: args.profile], judge_config_for("gemini", "bench-profile", None, args.policy).pk)
            config = judge_config_for("gemini", None, None, args.policy)
            rates = []
            for n, processes in enumerate(int(p) for p in args.processes.split(",")):
                judged_by = config if n == 0 else judge_config_for("gemini", f"bench-{processes}p", None, args.policy)
                fake_before = _process_cpu(fake.pid)
                total, wall, cpu = _judge_run(run, judged_by, args.concurrency, processes, args.threads)
                fake_cpu = _process_cpu(fake.pid) - fake_before
                judged = Judgment.objects.filter(config=judged_by).exclude(verdict="NONE").count()
                rates.append((processes, _report(args, processes, judged, total, wall, cpu)))
                print(f"  calls in flight        at most {_peak_in_flight(url)} at once at the fake so far "
                      f"(the limit: {processes} x {args.concurrency})")
                print(f"  the fake's CPU         {fake_cpu * 1000 / total:.1f} ms per judgment (Python parsing each "
                      f"request's JSON and images on the same {os.cpu_count()} cores; a real Gemini's is not ours)")
            for processes, rate in rates[1:]:
                print(f"{processes} processes            {rate / rates[0][1]:.2f}x the rate of {rates[0][0]} "
                      f"(target 1.8x for 2 when one is CPU-bound)")
            _as_users_run_it(args, run, url, fake.pid, Path(tmp))
            if args.celery:
                _celery_run(args, run, url, Path(tmp), rates[0][1])
            sample = ids[: args.full_sample]
            full = judge_config_for("gemini", None, None, "full")
            _judge_run_sample(run, full, sample)
        finally:
            fake.terminate()
            fake.wait(10)
        policy_tokens, full_tokens = _image_tokens(config, sample), _image_tokens(full, sample)
        print(f"image tokens per episode `{args.policy}` {policy_tokens:,.0f} vs full-size {full_tokens:,.0f} "
              f"({1 - policy_tokens / max(1, full_tokens):.0%} fewer; target 40%)")


def _as_users_run_it(args, run, url: str, fake_pid: int, tmp: Path) -> None:
    """The figures as a user gets them: whole processes, each its own Python, Django and threads, side by side with
    the reference's own command on the same run dir, the same fake and the same calls in flight."""
    from bench.judge_process import judge_two_processes, judge_whole_process, process_cpu
    from taskgen.engine.control import run_start
    from taskgen.models import Judgment, PipelineRun
    from taskgen.stages.judge.service import judge_config_for
    from taskgen.stages.judge.work import JudgeParams

    env = {**os.environ, "GOOGLE_GEMINI_BASE_URL": url}
    rows = []
    command = f"taskgen judge {run.name} --workers {args.concurrency}"
    one = judge_whole_process(run=run.name, model="bench-cli", workers=args.concurrency, images=args.policy, env=env,
                              fake_pid=fake_pid, logs=tmp)
    rows.append((f"app: {command}", 1, one, load()))
    config = judge_config_for("gemini", "bench-cli-two", None, args.policy)
    pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE,
                             params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))
    _close_connections()
    two = judge_two_processes(
        pipeline_run_id=pipeline_run.pk, workers=args.concurrency, env=env, fake_pid=fake_pid, logs=tmp,
        judged=lambda: Judgment.objects.filter(config=config).exclude(verdict="NONE").count())
    rows.append((f"app: 2 x taskgen resume {pipeline_run.pk} --workers {args.concurrency}", 2, two, load()))
    reference = None
    if args.reference:
        from bench.judge_process import Measured, quiet_start, timeline_of, window_begin
        from bench.judge_reference import reference_judge
        from bench.real_screens import corpus_run_dir, harness_run_dir

        run_dir = corpus_run_dir(harness_run_dir(), WORK, episodes=args.episodes)
        quiet = quiet_start()
        fake_before = process_cpu(fake_pid)
        window_begin(url)  # the reference's own clock times its process (started_at, ended_at)
        got = reference_judge(run_dir=run_dir, base_url=url, workers=args.concurrency)
        reference = Measured(got["episodes"], got["wall_s"], got["cpu_s"], process_cpu(fake_pid) - fake_before,
                             quiet=quiet, timeline=timeline_of(url, got["started_at"], got["ended_at"]))
        rows.append((f"reference: taskgen.py judge RUN_DIR --workers {args.concurrency}", 1, reference, load()))
    _table(args, rows)
    _timelines(args, rows)
    print(f"  2 processes            {two.rate() / one.rate():.2f}x the rate of one (target 1.8x when the fake is "
          f"not the limit); the fake's CPU: {two.fake_cpu / two.wall:.0%} of one core over the two processes' wall "
          f"({one.fake_cpu / one.wall:.0%} over one's), {os.cpu_count()} cores for everything")
    print(f"  {_waves(one.judged, args.concurrency, args.latency)}")
    print(f"  where the CPU went     one process, in cores over its wall: {one.where()}")
    print(f"                         two processes: {two.where()}")
    if reference is not None:
        print(f"  the app beside the reference: {one.rate() / reference.rate():.2f}x its throughput, "
              f"{reference.cpu_ms() / one.cpu_ms():.2f}x less CPU per judgment (targets: 5x less, 12 ms at most)")
    if args.py_spy:
        _py_spy(args, run, env, fake_pid, tmp)


def _timelines(args, rows: list) -> None:
    """Where each whole process's wall went, from the fake's window of calls: its start, its calls against their
    floor (the waves), its end."""
    for command, processes, measured, _ in rows:
        if measured.timeline is not None:
            words = measured.timeline.words(places=processes * args.concurrency, latency=args.latency)
            who = f"{command.split(':')[0]}, {processes} process{'es' if processes > 1 else ''}"
            print(f"  timeline of {who + ':':<20} {words}")


def _waves(calls: int, places: int, latency: float) -> str:
    """The least wall time `calls` take on `places` and on twice as many (each place makes one call at a time, each
    call `latency`): the two processes' cap against one before either pays its start, as the run's size sets it."""
    one, two = math.ceil(calls / places), math.ceil(calls / (2 * places))
    return (f"calls in waves          {calls} calls on {places} places take at least {one} calls' time "
            f"({one * latency:.2f} s), on {2 * places} places {two} ({two * latency:.2f} s): two processes' cap is "
            f"{one / two:.2f}x one before their start")


def _py_spy(args, run, env: dict, fake_pid: int, tmp: Path) -> None:
    """One more `taskgen judge` process under py-spy: where its CPU goes, start and setup included."""
    from bench.judge_process import judge_whole_process
    from bench.py_spy import py_spy_prefix, py_spy_top

    raw = WORK / "judge.py-spy.txt"  # kept for a closer look (py-spy's collapsed stacks)
    spied = judge_whole_process(run=run.name, model="bench-cli-spy", workers=args.concurrency, images=args.policy,
                                env=env, fake_pid=fake_pid, logs=tmp, prefix=py_spy_prefix(raw))
    print(f"py-spy of `taskgen judge`  {spied.judged} judged, {spied.cpu_ms():.1f} ms CPU per judgment under the "
          f"sampler (py-spy's own included) ({load()})")
    print("\n".join("  " + line for line in py_spy_top(raw, root=str(ROOT) + "/")))


def _table(args, rows: list) -> None:
    """The whole-process figures side by side, each with the load when it ended."""
    print(f"as users run it          whole processes (targets: 90% of the ideal, 12 ms CPU); fake Gemini "
          f"{args.latency} s, {args.concurrency} calls in flight per process; CPU from os.wait4 (the process and its "
          "children)")
    print(f"  {'command':<58} {'judged':>6} {'wall s':>7} {'ep/s':>6} {'ideal':>6} {'CPU ms/j':>8} "
          f"{'fake ms/j':>9}  load")
    for command, processes, measured, at in rows:
        ideal = processes * args.concurrency / args.latency
        print(f"  {command:<58} {measured.judged:>6} {measured.wall:>7.1f} {measured.rate():>6.1f} "
              f"{measured.rate() / ideal:>6.1%} {measured.cpu_ms():>8.1f} "
              f"{measured.fake_cpu * 1000 / max(1, measured.judged):>9.1f}  {at}, {measured.quiet}")


def _celery_run(args, run, url: str, tmp: Path, rate_here: float) -> None:
    """The run judged by real Celery workers of the `judge` queue (the demo's and docker-compose's command), one
    worker process, then two, each already up and answering before the run starts, as an admin's run from the
    browser finds them; from the run's start to its end, beside the rate of one process of --workers threads."""
    if not os.environ.get("DATABASE_URL"):
        print("celery workers           skipped: they need PostgreSQL (DATABASE_URL), not this process's SQLite file")
        return
    one = _celery_workers_judge(args, run, url, tmp, processes=1, rate_here=rate_here)
    two = _celery_workers_judge(args, run, url, tmp, processes=2, rate_here=rate_here)
    print(f"  2 Celery workers       {two / one:.2f}x the rate of one (target 1.8x for two worker processes; each "
          f"started before its run, as the app's workers run)")


def _celery_workers_started(args, url: str, tmp: Path, processes: int) -> list[subprocess.Popen]:
    """`processes` judge workers (each its own node name), once every one answers a ping."""
    from taskgen.celery import app as celery_app
    from taskgen.demo import judge_worker_command

    env = {**os.environ, "GOOGLE_GEMINI_BASE_URL": url, "TASKGEN_JUDGE_CONCURRENCY": str(args.concurrency)}
    celery_app.control.purge()
    workers = []
    for n in range(processes):
        command = judge_worker_command([sys.executable, "-m", "celery", "-A", "taskgen", "worker", "--loglevel",
                                        "WARNING", "--without-heartbeat", "--without-mingle", "--without-gossip"])
        command[command.index("judge@%h")] = f"judge{n + 1}@%h"
        with (tmp / f"celery-judge-{processes}-{n + 1}.log").open("w") as log:  # the worker keeps its own copy
            workers.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True))
    for _ in range(240):
        if len(celery_app.control.ping(timeout=0.5) or []) >= processes:
            return workers
    _celery_workers_stop(workers)
    raise SystemExit(f"the Celery judge workers did not all answer; their logs: {tmp}/celery-judge-*.log")


def _celery_workers_stop(workers: list[subprocess.Popen]) -> None:
    for worker in workers:
        os.killpg(worker.pid, 15)
    for worker in workers:
        worker.wait(30)


def _celery_workers_judge(args, run, url: str, tmp: Path, *, processes: int, rate_here: float) -> float:
    """The run judged, under a judge config of its own, by `processes` Celery workers; episodes/s."""
    from taskgen.engine.control import run_start
    from taskgen.models import PipelineRun
    from taskgen.stages.judge.service import judge_config_for
    from taskgen.stages.judge.work import JudgeParams

    workers = _celery_workers_started(args, url, tmp, processes)
    try:
        config = judge_config_for("gemini", f"bench-celery-{processes}", None, args.policy)
        cpu_before = sum(_process_cpu(w.pid) for w in workers)
        started = time.perf_counter()
        pipeline_run = run_start(stage=PipelineRun.Stage.JUDGE,
                                 params=JudgeParams(run=run.pk, config_id=config.pk, judge=config.key))
        while not PipelineRun.objects.get(pk=pipeline_run.pk).is_finished:
            time.sleep(0.05)
        wall = time.perf_counter() - started
        cpu = sum(_process_cpu(w.pid) for w in workers) - cpu_before
    finally:
        _celery_workers_stop(workers)
    pipeline_run.refresh_from_db()
    rate, ideal = pipeline_run.total / wall, processes * args.concurrency / args.latency
    print(f"celery workers: {processes}      {pipeline_run.done} judged, {pipeline_run.failed} failed in {wall:.1f} s "
          f"({load()})")
    print(f"  throughput             {rate:.1f} episodes/s; ideal {ideal:.1f}/s ({processes} x {args.concurrency} / "
          f"{args.latency} s); ratio {rate / ideal:.1%}; {rate / rate_here:.2f}x one forked process here (the run's "
          f"start and end included: messages, the workers' slices)")
    print(f"  workers' CPU per judgment {cpu * 1000 / pipeline_run.total:.1f} ms (each process a thread pool)")
    return rate


def _judge_run_sample(run, config, ids: list[int]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from taskgen.stages.judge.service import judge_episode

    def one(episode_id: int) -> None:
        try:
            judge_episode(episode_id=episode_id, config_id=config.pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, ids))


if __name__ == "__main__":
    main()
