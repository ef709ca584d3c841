"""Rows written in bulk with PostgreSQL's COPY (an import's episodes, screenshots and blob rows).

The ORM's bulk_create builds a model instance per row and, on PostgreSQL, dumps every column as an array in Python:
most of an import's own CPU. COPY takes plain tuples that psycopg formats in C. SQLite has no COPY; `by_copy()` is
the one place that decides, and callers keep the ORM for the other case. A `CopyTable` writes the same values the
ORM would: a column the caller does not give gets its field's default, timestamps set on creation get now.
"""
from __future__ import annotations

import json
from collections.abc import Iterable

from django.db import connection, models
from django.utils import timezone


def by_copy() -> bool:
    """Whether bulk rows go in with COPY (PostgreSQL) rather than the ORM's bulk_create."""
    return connection.vendor == "postgresql"


def ids_reserve(model: type[models.Model], count: int) -> list[int]:
    """`count` new primary keys from the table's sequence, ascending (COPY returns none, and rows that point at the
    new ones need them first)."""
    if count <= 0:
        return []
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [table, model._meta.pk.column, count])
        return sorted(row[0] for row in cursor.fetchall())


def _json_or_null(value: object) -> str | None:
    """A nullable JSON field's value as the ORM writes it: None is SQL NULL, not the JSON `null`."""
    return None if value is None else json.dumps(value)


class CopyTable:
    """A model's concrete columns as COPY writes them: each row a dict by attname (its `id` too when `with_pk`),
    JSON fields as Python values; a column missing from a row gets the field's default, the same for every row."""

    def __init__(self, model: type[models.Model], *, with_pk: bool) -> None:
        self.model = model
        now = timezone.now()
        self.columns: list[str] = []
        self._spec = []  # (attname, default, how a JSON field's value is written, or None for other fields)
        for field in model._meta.concrete_fields:
            if field.primary_key and not with_pk:
                continue  # the table's own default (its identity) numbers the row
            if isinstance(field, models.DateTimeField) and (field.auto_now or field.auto_now_add):
                default = now
            else:
                default = None if field.primary_key else field.get_default()
            json_of = (_json_or_null if field.null else json.dumps) if isinstance(field, models.JSONField) else None
            self._spec.append((field.attname, default, json_of))
            self.columns.append(field.column)

    def row(self, values: dict) -> tuple:
        get = values.get
        return tuple(get(attname, default) if json_of is None else json_of(get(attname, default))
                     for attname, default, json_of in self._spec)

    def write(self, rows: Iterable[dict]) -> None:
        """COPY the rows in; a refusal is Django's DatabaseError (IntegrityError, DataError...), as from the ORM."""
        table = connection.ops.quote_name(self.model._meta.db_table)
        names = ", ".join(connection.ops.quote_name(c) for c in self.columns)
        with connection.cursor() as cursor, connection.wrap_database_errors:
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for values in rows:
                    copy.write_row(self.row(values))
