#!/bin/bash
# One benchmark round of issue 26 (README, Benchmarks): the five commands once each, one after another, on scratch
# PostgreSQL databases lead_qjudge, lead_1m, lead_qimport, lead_qseed (made if missing) and Redis database 9.
# Run it from a checkout nobody edits while it runs; nothing else on the machine; each step waits for the machine to
# settle first. Logs: $LOGS/rROUND_*.log and
# $LOGS/rounds.log (default /tmp/taskgen-rounds). NOSEED=1 leaves out the seed's scale.
# usage: bench/rounds.sh ROUND [CHECKOUT]
R=${1:?usage: bench/rounds.sh ROUND [CHECKOUT]}; WT=${2:-$(dirname "$0")/..}; cd "$WT" || exit 1
L=${LOGS:-/tmp/taskgen-rounds}; mkdir -p "$L"
for db in lead_qjudge lead_1m lead_qimport lead_qseed; do
  psql -q -h 127.0.0.1 -U postgres -tc "select 1 from pg_database where datname='$db'" | grep -q 1 \
    || psql -q -h 127.0.0.1 -U postgres -c "create database $db"
done
make install >/dev/null 2>&1
PG=postgres://postgres@127.0.0.1:5432
said() { echo "round $R $* $(date +%T)" >> "$L/rounds.log"; }
# settle: wait (5 minutes at most) until the machine is quiet again, by the one rule every benchmark's own figures
# start on (bench/cpu.py machine_settle: a 2 s window with the machine under 10% busy): the step before (the previous
# round's seed, the 1M pages' PostgreSQL) leaves both cores busy for a while after it ends
settle() { said "$(.venv/bin/python bench/cpu.py settle --most 300)"; }
# step NAME COMMAND...: one benchmark on a quiet machine, its output in $L/rROUND_NAME.log
step() { local name=$1; shift; settle; env "$@" > "$L/r${R}_$name.log" 2>&1; said "$name done"; }
said "start $(git rev-parse --short HEAD); memory: $(.venv/bin/python -c 'from bench.disk import machine_memory; print(machine_memory())')"
settle
said "this machine: $(.venv/bin/python bench/machine.py --line)"
step judge DATABASE_URL=$PG/lead_qjudge .venv/bin/python bench/judge.py --episodes 560 --reference --processes 1,2
step pages DATABASE_URL=$PG/lead_1m .venv/bin/python bench/review_pages.py --episodes 1000000 --repeat 20 \
  --run-page-repeat 10 --json
# --perf: after its figures, each first import once more under perf (the kernel's share; ext4's inode allocation's)
step import DATABASE_URL=$PG/lead_qimport .venv/bin/python bench/import_run.py --perf
step export .venv/bin/python bench/export.py --repeats 4
[ -n "$NOSEED" ] || step seed DATABASE_URL=$PG/lead_qseed CELERY_BROKER_URL=redis://127.0.0.1:6379/9 \
  .venv/bin/python bench/seed_scale.py
said end
