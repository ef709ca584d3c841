#!/bin/bash
# One benchmark round of issue 26 (README, Benchmarks): the five commands once each, one after another, on scratch
# PostgreSQL databases lead_qjudge, lead_1m, lead_qimport, lead_qseed (made if missing) and Redis database 9.
# Run it from a checkout nobody edits while it runs; nothing else on the machine. Logs: $LOGS/rROUND_*.log and
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
echo "round $R start $(date +%T) $(git rev-parse --short HEAD)" >> $L/rounds.log
DATABASE_URL=$PG/lead_qjudge .venv/bin/python bench/judge.py --episodes 560 --reference --processes 1,2 > $L/r${R}_judge.log 2>&1
echo "round $R judge done $(date +%T)" >> $L/rounds.log
DATABASE_URL=$PG/lead_1m .venv/bin/python bench/review_pages.py --episodes 1000000 --repeat 20 --run-page-repeat 10 --json > $L/r${R}_pages.log 2>&1
echo "round $R pages done $(date +%T)" >> $L/rounds.log
DATABASE_URL=$PG/lead_qimport .venv/bin/python bench/import_run.py > $L/r${R}_import.log 2>&1
echo "round $R import done $(date +%T)" >> $L/rounds.log
.venv/bin/python bench/export.py --repeats 4 > $L/r${R}_export.log 2>&1
echo "round $R export done $(date +%T)" >> $L/rounds.log
if [ -z "$NOSEED" ]; then
DATABASE_URL=$PG/lead_qseed CELERY_BROKER_URL=redis://127.0.0.1:6379/9 .venv/bin/python bench/seed_scale.py > $L/r${R}_seed.log 2>&1
echo "round $R seed done $(date +%T)" >> $L/rounds.log
fi
echo "round $R end $(date +%T)" >> $L/rounds.log
