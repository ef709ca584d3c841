"""A site's data inside one sandbox session, with every row change recorded as a DESIGN.md change entry."""
from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from sandbox.seed import seed_site


class SiteState:
    """Rows of one site in one session; create/update/delete append {collection, op, before, after, changed}."""

    def __init__(self, *, site: str, data: dict[str, list[dict]], changes: list[dict]) -> None:
        self.site = site
        self.data = data
        self.changes = changes

    @classmethod
    def of_session(cls, session, site: str) -> SiteState:
        """The session's copy of `site`, seeded fresh the first time the session touches it."""
        if site not in session.state:
            session.state[site] = seed_site(site)
        return cls(site=site, data=session.state[site], changes=session.changes)

    def rows(self, collection: str) -> list[dict]:
        return self.data.setdefault(collection, [])

    def get(self, collection: str, row_id: Any) -> dict | None:
        try:
            wanted = int(row_id)
        except (TypeError, ValueError):
            return None
        return next((r for r in self.rows(collection) if r.get("id") == wanted), None)

    def filter(self, collection: str, **where: Any) -> list[dict]:
        return [r for r in self.rows(collection) if all(r.get(k) == v for k, v in where.items())]

    def create(self, collection: str, values: dict) -> dict:
        rows = self.rows(collection)
        row = {"id": max((r["id"] for r in rows), default=0) + 1, **values}
        rows.append(row)
        self._record(collection, "create", None, row, {k: v for k, v in row.items()})
        return row

    def update(self, collection: str, row: dict, **values: Any) -> dict:
        changed = {k: [row.get(k), v] for k, v in values.items() if row.get(k) != v}
        if changed:
            before = copy.deepcopy(row)
            row.update(values)
            self._record(collection, "update", before, row, changed)
        return row

    def delete(self, collection: str, row: dict) -> None:
        self.rows(collection).remove(row)
        self._record(collection, "delete", row, None, {})

    def delete_many(self, collection: str, rows: Iterable[dict]) -> None:
        for row in list(rows):
            self.delete(collection, row)

    def _record(self, collection: str, op: str, before: dict | None, after: dict | None, changed: dict) -> None:
        self.changes.append({"site": self.site, "collection": collection, "op": op,
                             "before": copy.deepcopy(before), "after": copy.deepcopy(after), "changed": changed})
