"""The SQLite layout: the SQL family's schema (``harel.store.common.sql.schema``: tables,
indexes, the schema-version row, the upgrade from version 1) plus SQLite's connection
settings.

The tables, indexes and their version live in the shared SQL-family description because
libSQL and rqlite store the very same layout; this module only adds what is SQLite's own:
the PRAGMAs run on every new connection.
"""

from __future__ import annotations

from harel.store.author.sql import DDL, SCHEMA_VERSION, UPGRADES

from harel_store_sqlite._options import SqliteOptions

__all__ = ["DDL", "SCHEMA_VERSION", "UPGRADES", "pragmas"]


def pragmas(options: SqliteOptions) -> list[str]:
    """The PRAGMA statements run at open (values validated, so they are safe to inline):
    the busy timeout, WAL for files (readers never block the writer), ``synchronous``."""
    statements = [f"PRAGMA busy_timeout = {options.busy_timeout_ms:d}"]
    if not options.in_memory:
        statements.append("PRAGMA journal_mode = WAL")
    statements.append(f"PRAGMA synchronous = {options.synchronous}")
    return statements
