"""Trigram indexes for the run page's search (task id or instruction contains ...), on PostgreSQL only.

Django's `icontains` reads `UPPER(column) LIKE UPPER('%words%')`, which no b-tree index serves: at 100,000 tasks each
search read the whole task table twice (the page's count and its rows). A GIN trigram index on the same UPPER()
expressions answers it from the index. pg_trgm is a trusted extension (PostgreSQL 13+): a database owner may create
it. SQLite, the laptop default, keeps its plain scan.
"""
from django.db import migrations

COLUMNS = {"task_search_task_id_trgm": "upper(task_id::text)", "task_search_instruction_trgm": "upper(instruction)"}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, expression in COLUMNS.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON taskgen_task "
                              f"USING gin ({expression} gin_trgm_ops)")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in COLUMNS:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):

    dependencies = [
        ("review", "0006_validate_summary"),
        ("taskgen", "0001_initial"),
    ]

    operations = [migrations.RunPython(create, drop)]
