"""Fill PostgreSQL fast with COPY in text format (shared by the page benchmarks): rows are formatted as text lines in
Python, never as model instances, so a million episodes with their judgments, verifier results, labels and screens
take minutes, not the ORM's hours.

`copy_rows(model, columns, rows)` writes the given columns of each row and, for every other concrete column, the
field's default (the same value on every row: formatted once).
"""
from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from decimal import Decimal

CHUNK = 1 << 20  # bytes handed to COPY at a time
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: object) -> str:
    """One value as a field of COPY's text format."""
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, dict | list):
        value = json.dumps(value)
    return str(value).translate(_ESCAPES)


def _constant_columns(model, varying: Sequence[str]) -> tuple[list[str], str]:
    """The model's other concrete columns and their defaults as one text fragment (timestamps: now)."""
    from django.db import models
    from django.utils import timezone

    now, names, values = timezone.now(), [], []
    for field in model._meta.concrete_fields:
        if field.primary_key or field.column in varying or field.attname in varying:
            continue
        if isinstance(field, models.DateTimeField) and (field.auto_now or field.auto_now_add):
            value = now
        else:
            value = field.get_default()  # "" for a text field without one, None for a nullable one
        if value is None and not field.null:
            raise ValueError(f"{model.__name__}.{field.name} has no default: give it in the columns")
        names.append(field.column)
        values.append(copy_text(value))
    return names, "\t".join(values)


def copy_rows(model, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> int:
    """COPY `rows` (tuples in the order of `columns`, database column names) into `model`'s table; the other columns
    get their defaults. Returns the number of rows written."""
    from django.db import connection

    constant_names, constant = _constant_columns(model, columns)
    names = ", ".join(connection.ops.quote_name(c) for c in [*columns, *constant_names])
    tail = f"\t{constant}\n" if constant else "\n"
    count, buffer, size = 0, [], 0
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {model._meta.db_table} ({names}) FROM STDIN") as copy:
        for row in rows:
            line = "\t".join(map(copy_text, row)) + tail
            buffer.append(line)
            size += len(line)
            count += 1
            if size >= CHUNK:
                copy.write("".join(buffer).encode())
                buffer, size = [], 0
        if buffer:
            copy.write("".join(buffer).encode())
    return count
