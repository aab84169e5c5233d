"""The rqlite layout: exactly the SQL family's schema (``harel.store.common.sql.schema``).

Tables, indexes, the schema-version row and the upgrade from version 1 are shared with SQLite
and libSQL (one description, no copy); rqlite adds no connection settings of its own (its
nodes choose their SQLite PRAGMAs).  ``commit_token`` (in ``executions``) is the column the
single-request commit guards its side writes with.
"""

from __future__ import annotations

from harel.store.author.sql import DDL, SCHEMA_VERSION, UPGRADES

__all__ = ["DDL", "SCHEMA_VERSION", "TABLES", "UPGRADES"]

TABLES: tuple[str, ...] = tuple(
    text.split("(", 1)[0].split()[-1] for text in DDL if text.startswith("CREATE TABLE")
)
"""The table names of the layout (for test harnesses dropping a dataset)."""
