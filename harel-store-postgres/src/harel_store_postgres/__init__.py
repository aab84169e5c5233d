"""harel-store-postgres: the PostgreSQL ``ExecutionStore`` (psycopg 3, connection pools).

The store classes are imported on first access, so importing the plugin module
(``harel_store_postgres._plugin``) never loads psycopg.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_postgres.aio import AsyncPostgresStore
    from harel_store_postgres.sync import PostgresStore

__all__ = ["AsyncPostgresStore", "PostgresStore"]

_LAZY = {
    "PostgresStore": "harel_store_postgres.sync",
    "AsyncPostgresStore": "harel_store_postgres.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``PostgresStore`` / ``AsyncPostgresStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_postgres' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
