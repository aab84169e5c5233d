"""harel-store-postgres: the PostgreSQL ``ExecutionStore`` (psycopg 3, connection pools).

The store classes are imported on first access, so importing the spec the entry point
names (``harel_store_postgres._spec``) never loads psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_postgres.aio import AsyncPostgresStore
    from harel_store_postgres.sync import PostgresStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]

_LAZY = {
    "PostgresStore": "harel_store_postgres.sync",
    "AsyncPostgresStore": "harel_store_postgres.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
