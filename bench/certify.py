"""Certify: labels needed to certify an export at 0.9 with the design against simple random sampling, and the time
of one certify call at 100,000 episodes on PostgreSQL.

    .venv/bin/python bench/certify.py [--episodes 310] [--walks 200]          # labels needed (SQLite, cached run)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/SCRATCH .venv/bin/python bench/certify.py --timing 100000
    .venv/bin/python bench/certify.py --coverage 2000                          # the coverage test, bigger

Labels needed: a sandbox run of `--episodes` episodes (the 62 sandbox tasks repeated under new ids, attempted in
Chromium by the scripted agent with 30% seeded mistakes, cached in var/bench/certify/), judged by the rules baseline.
The export is the judge's successes with the verifier's failures kept in (the verifier is the hidden truth answering
for the reviewer, so it may neither leave episodes out nor stratify them: the "verifier disagrees" risk is dropped).
Each walk draws a fresh random order, labels as the design asks (or, for simple random sampling, one stratum of the
same episodes), a Not success leaving the export, and stops when the lower bound reaches 0.9; both are computed the
same way (the same bound, allocation and stopping rule).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VAR = ROOT / "var" / "bench" / "certify"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=310)
    parser.add_argument("--walks", type=int, default=200)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--timing", type=int, default=0, help="episodes for the timing of one certify call")
    parser.add_argument("--coverage", type=int, default=0, help="walks per scenario of the coverage simulation")
    return parser.parse_args()


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _sandbox_run(episodes: int) -> None:
    """Attempt and judge the sandbox run once (embedded defaults under var/bench/certify/)."""
    marker = VAR / f"judged-{episodes}"
    if marker.exists():
        return
    VAR.mkdir(parents=True, exist_ok=True)
    tasks = [json.loads(line) for line in (ROOT / "sandbox" / "tasks.jsonl").read_text().splitlines() if line.strip()]
    copies = [{**task, "task_id": f"{task['task_id']}-r{n}"} for n in range(-(-episodes // len(tasks)))
              for task in tasks][:episodes]
    tasks_file = VAR / "data" / f"tasks-{episodes}.jsonl"
    tasks_file.parent.mkdir(parents=True, exist_ok=True)
    tasks_file.write_text("".join(json.dumps(task) + "\n" for task in copies))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TASKGEN_VAR_DIR=str(VAR), TASKGEN_DATA_ROOT=str(VAR / "data"))
    name = f"certify-{episodes}"
    print(f"attempting {episodes} sandbox episodes in Chromium once (cached in {VAR})", flush=True)
    for args in (["migrate", "-v0"],
                 ["taskgen", "attempt", "--tasks", str(tasks_file), "--agent", "scripted", "--mistakes", "0.3",
                  "--name", name, "--workers", "2"],
                 ["taskgen", "judge", name, "--provider", "rules"]):
        subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    marker.touch()


def _setup_django(embedded: bool) -> None:
    if embedded:
        os.environ.pop("DATABASE_URL", None)
        os.environ.update(TASKGEN_VAR_DIR=str(VAR), TASKGEN_DATA_ROOT=str(VAR / "data"))
    elif os.environ.get("DATABASE_URL", "").startswith("postgres"):
        from bench.cpu import scratch_database_ensure

        scratch_database_ensure(os.environ["DATABASE_URL"])  # a missing one waited out the pool and said nothing
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
    import django
    django.setup()


def _population(episodes: int) -> tuple[list[list[bool]], list[bool], dict]:
    """The export's episodes as strata of verifier truths (the design's) and as one list (simple random sampling)."""
    from taskgen.models import Episode, Judgment, Run, VerifierResult
    from taskgen.stages.export.select import export_select
    from taskgen.triage.risk import RISK_NAMES, risk_sets
    run = Run.objects.get(name=f"certify-{episodes}")
    config = Judgment.objects.filter(episode__run=run).first().config
    picked = [c.episode_id for c in export_select(run=run, judge_config=config, include_verifier_failed=True).picked]
    truth = dict(VerifierResult.objects.filter(episode_id__in=picked).values_list("episode_id", "ok"))
    sets = risk_sets(Episode.objects.filter(pk__in=picked), config.pk)
    names = [name for name in RISK_NAMES if name != "verifier_disagrees"]  # the hidden truth stratifies nothing
    strata: dict[str, list[bool]] = {}
    for pk in picked:
        strata.setdefault(next((n for n in names if pk in sets[n]), "rest"), []).append(truth.get(pk, False))
    info = {name: (len(values), round(sum(values) / len(values), 3)) for name, values in strata.items()}
    return list(strata.values()), [t for values in strata.values() for t in values], info


def _labels_needed(strata: list[list[bool]], walks: int, target: float, seed: int) -> tuple[float, float, int]:
    from taskgen.stages.certify.simulate import labelling_walk
    rng = random.Random(seed)
    needed, certified = [], 0
    for _ in range(walks):
        shuffled = [rng.sample(stratum, len(stratum)) for stratum in strata]
        walk = labelling_walk(shuffled, target=target)
        needed.append(walk.labels)
        certified += walk.certified
    return statistics.mean(needed), statistics.median(needed), certified


def labels_bench(args: argparse.Namespace) -> None:
    _sandbox_run(args.episodes)
    _setup_django(embedded=True)
    from django.core.management import call_command
    call_command("migrate", verbosity=0)  # a cached run made before a migration
    strata, flat, info = _population(args.episodes)
    size, true = len(flat), sum(flat)
    print(f"sandbox run of {args.episodes} episodes, rules baseline: the export holds {size} judged successes, "
          f"{true} of them verifier successes (precision {true / size:.3f}); strata (size, precision): {info}")
    design = _labels_needed(strata, args.walks, args.target, seed=1)
    simple = _labels_needed([flat], args.walks, args.target, seed=1)
    print(f"labels to certify at {args.target} (mean / median over {args.walks} walks, certified in every walk: "
          f"{design[2] == args.walks and simple[2] == args.walks}):")
    print(f"  design (strata by risk, Neyman allocation): {design[0]:.1f} / {design[1]:.0f}")
    print(f"  simple random sampling of the same episodes: {simple[0]:.1f} / {simple[1]:.0f}")
    print(f"  ratio design / simple random: {design[0] / simple[0]:.2f}x (target <= 0.6x) ({_load()})")
    simulated_bench(args)


SIMULATED = {  # (sizes, true precision) per stratum, riskiest first, about 300 judged successes each
    "tiers separate false positives": ([20, 30, 250], [0.1, 0.4, 0.97]),
    "tiers separate them a little": ([40, 60, 200], [0.7, 0.8, 0.93]),
    "tiers do not separate them": ([40, 60, 200], [0.89, 0.89, 0.89]),
}


def simulated_bench(args: argparse.Namespace) -> None:
    """The same comparison on populations of known truth whose risk tiers separate false positives well, a little,
    or not at all (the sandbox run above is the last kind: its false positives are nearly all in "rest")."""
    from taskgen.stages.certify.simulate import population_draw
    rng = random.Random(5)
    for name, (sizes, rates) in SIMULATED.items():
        strata = population_draw(sizes, rates, rng)
        design = _labels_needed(strata, args.walks, args.target, seed=2)
        simple = _labels_needed([[t for s in strata for t in s]], args.walks, args.target, seed=2)
        print(f"  simulated, {name} {list(zip(sizes, rates, strict=True))}: design {design[0]:.1f}, simple random "
              f"{simple[0]:.1f}: {design[0] / simple[0]:.2f}x")


def _fill(n: int) -> tuple[object, object]:
    """A run of n episodes with rows, all judged successes by one config: 5% inconsistent, 5% with unsupported
    citations, the rest plain; 2% labelled (final labels), in a fresh scratch database."""
    from django.core.management import call_command
    from django.db import connection

    from taskgen.models import Episode, FinalLabel, JudgeConfig, Judgment, Run, Site, Task
    call_command("migrate", verbosity=0)
    run = Run.objects.filter(name=f"certify-timing-{n}").first()
    config, _ = JudgeConfig.objects.get_or_create(provider="rules", model="rules-v2", prompt_version="judge-v1",
                                                  image_policy="none")
    if run is not None and Episode.objects.filter(run=run).count() == n:
        return run, config
    print(f"filling {n} episodes (once)", flush=True)
    run = Run.objects.create(name=f"certify-timing-{n}")
    sites = [Site.objects.get_or_create(slug=f"site{i}", defaults={"name": f"Site {i}"})[0] for i in range(30)]
    rng = random.Random(3)
    for start in range(0, n, 10000):
        chunk = range(start, min(n, start + 10000))
        tasks = Task.objects.bulk_create(Task(task_id=f"ct-{n}-{i:06d}", site=sites[i % 30], instruction=f"task {i}",
                                              task_kind="info") for i in chunk)
        episodes = Episode.objects.bulk_create(
            Episode(run=run, task=t, site=t.site, task_kind="info", task_order=i, has_rows=True, row_count=5,
                    steps=5) for i, t in zip(chunk, tasks, strict=True))
        Judgment.objects.bulk_create(
            Judgment(episode=e, config=config, verdict="SUCCESS", inconsistent=(i % 20 == 0),
                     unsupported_citations=int(i % 20 == 1)) for i, e in zip(chunk, episodes, strict=True))
        FinalLabel.objects.bulk_create(
            FinalLabel(episode=e, verdict="SUCCESS" if rng.random() < 0.9 else "NOT SUCCESS")
            for e in episodes if rng.random() < 0.02)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return run, config


def timing_bench(args: argparse.Namespace) -> None:
    _setup_django(embedded=False)
    from django.db import connection

    from taskgen.stages.certify.service import CertifyParams, certificate_compute
    if connection.vendor != "postgresql":
        print("--timing needs DATABASE_URL=postgres://... (a scratch database)")
        return
    run, config = _fill(args.timing)
    params = CertifyParams(run=run, judge_config=config)
    started = time.perf_counter()
    certificate_compute(params=params)  # the seed is drawn once, the export order computed and kept
    print(f"first call (the run's export order computed and kept): {(time.perf_counter() - started) * 1000:.0f} ms "
          f"({_load()})")
    for label, cuts in (("certify call (as `taskgen certify RUN`)", False), ("with the cuts table", True)):
        times, cpu = [], []
        for _ in range(5):
            started, cpu_started = time.perf_counter(), time.process_time()
            cert = certificate_compute(params=params, cuts=cuts)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
        print(f"{label} at {args.timing} episodes (population {cert['population']}, {cert['labels']} labels used): "
              f"median {statistics.median(times):.0f} ms wall [{', '.join(f'{t:.0f}' for t in times)}], this "
              f"process's CPU {statistics.median(cpu):.0f} ms (the rest is PostgreSQL and waiting) ({_load()})")


def coverage_bench(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taskgen.settings")
    from taskgen.stages.certify.simulate import labelling_walk, population_draw
    from tests.test_certify_stats import SCENARIOS
    rng = random.Random(11)
    for name, (sizes, rates) in SCENARIOS.items():
        walks = [labelling_walk(population_draw(sizes, rates, rng), target=0.9, look_every=1)
                 for _ in range(args.coverage)]
        missed = sum(w.missed for w in walks) / len(walks)
        print(f"{name}: the bound above the truth at some look in {missed:.4f} of {len(walks)} walks "
              f"(at most 0.05 allowed); certified in {sum(w.certified for w in walks) / len(walks):.2f}")


def main() -> None:
    args = _args()
    if args.coverage:
        coverage_bench(args)
    elif args.timing:
        timing_bench(args)
    else:
        labels_bench(args)


if __name__ == "__main__":
    main()
