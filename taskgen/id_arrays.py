"""Many ids out of the database at once: a query's integer column as one numpy array.

Half a million ids through the ORM are half a million Python rows (about a second at a million episodes); on
PostgreSQL one `string_agg` row parsed by numpy is a small fraction of that. Elsewhere (SQLite) the rows are read.
"""
from __future__ import annotations

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL


def id_array(queryset: QuerySet, field: str = "pk"):
    """The `field` values of `queryset` (integers, in no particular order) as an int64 numpy array."""
    import numpy as np  # numpy only where many ids are read, not at every process's start

    values = queryset.order_by().values_list(field, flat=True)
    if connection.vendor != "postgresql":
        return np.fromiter(values, dtype=np.int64)
    try:
        sql, params = values.query.sql_with_params()
    except EmptyResultSet:  # a query Django knows selects nothing (`.none()`, an empty IN)
        return np.zeros(0, dtype=np.int64)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT string_agg(v::text, ',') FROM ({sql}) AS s(v)", params)  # noqa: S608 - Django's SQL
        text = cursor.fetchone()[0]
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)


def ids_literal(ids) -> str:
    """Ids as one PostgreSQL array literal ('{1,2,3}'), passed as a single parameter (`= ANY(%s::bigint[])`): an
    IN list of thousands of placeholders costs more to build and send than the query costs to run."""
    return "{" + ",".join(map(str, map(int, ids))) + "}"


def among(model, ids, column: str = "id"):
    """A filter: `column` of `model` is one of `ids`. On PostgreSQL one array parameter (`= ANY(%s)`): an IN list of
    thousands of placeholders costs more to build and send than the query costs to run."""
    if connection.vendor == "postgresql":
        sql = f'"{model._meta.db_table}"."{column}" = ANY(%s::bigint[])'  # names from the model; ids a parameter
        return RawSQL(sql, (ids_literal(ids),), output_field=BooleanField())  # noqa: S611
    return Q(**{f"{column}__in": list(ids)})
