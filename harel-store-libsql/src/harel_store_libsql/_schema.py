"""The libSQL layout: the SQL family's schema (``harel.store.common.sql.schema``: tables,
indexes, the schema-version row, the upgrade from version 1) plus libSQL's connection settings.

libSQL runs SQLite's engine, so a libSQL database holds exactly the layout of a SQLite one
(and a file written by either backend opens with the other).  This module only adds the
PRAGMAs run on a new connection to a local file.
"""

from __future__ import annotations

from harel.store.author.sql import DDL, SCHEMA_VERSION, UPGRADES

from harel_store_libsql._options import LibsqlOptions

__all__ = ["DDL", "SCHEMA_VERSION", "UPGRADES", "pragmas"]


def pragmas(options: LibsqlOptions) -> list[str]:
    """The PRAGMAs run at open (values validated, so they are safe to inline): WAL for a local
    file (readers never block the writer; the driver's default is a rollback journal) and
    ``synchronous``.  None for a server (it owns its journal) or a replica (the replication
    engine owns its file).  Lock waits are the store's own (see ``_driver.execute``)."""
    if options.mode != "file":
        return []
    statements = [] if options.in_memory else ["PRAGMA journal_mode = WAL"]
    statements.append(f"PRAGMA synchronous = {options.synchronous}")
    return statements
