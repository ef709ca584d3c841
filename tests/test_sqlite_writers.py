"""The embedded default (SQLite) loses no write when several processes write at once.

A Celery worker started with DATABASE_URL=sqlite:///... (as the tests and users start one) once ran without the
app's SQLite options: its read-then-write transactions failed at once with "database is locked", and a sandbox
page's write was lost. These run real processes against one SQLite file, the way a worker and the web server do.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from django.conf import settings

WRITER = """
import django
django.setup()
from django.db import connection, transaction
for _ in range({n}):
    with transaction.atomic():  # read, then write: what a sandbox page and a worker's claim do
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM counter")
            seen = cursor.fetchone()[0]
            cursor.execute("INSERT INTO counter (seen) VALUES (%s)", [seen])
print("ok")
"""


def _env(db_url: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return {**env, "DATABASE_URL": db_url, "DJANGO_SETTINGS_MODULE": "taskgen.settings",
            "TASKGEN_VAR_DIR": str(tmp_path / "var")}


def test_a_sqlite_database_url_gets_the_same_options_as_the_default(tmp_path):
    code = "from django.conf import settings; print(sorted(settings.DATABASES['default']['OPTIONS'].items()))"
    out = subprocess.run([sys.executable, "-c", code], env=_env(f"sqlite:///{tmp_path / 'x.sqlite3'}", tmp_path),
                         cwd=settings.BASE_DIR, capture_output=True, text=True, check=True).stdout
    assert "('transaction_mode', 'IMMEDIATE')" in out and "('timeout', 30)" in out


def test_two_processes_writing_one_sqlite_file_both_finish_every_write(tmp_path):
    db = tmp_path / "shared.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, seen INTEGER)")
    env, n = _env(f"sqlite:///{db}", tmp_path), 150
    writers = [subprocess.Popen([sys.executable, "-c", WRITER.format(n=n)], env=env, cwd=settings.BASE_DIR,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outcomes = [w.communicate(timeout=120) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], [err[-800:] for _, err in outcomes]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seen FROM counter ORDER BY id").fetchall()
    # every write landed, and each transaction saw every write committed before it (no lost update)
    assert [seen for (seen,) in rows] == list(range(3 * n))
