"""harel-store-sqlite: the SQLite ``ExecutionStore`` (sync over sqlite3; async twin on one
worker thread).

The store classes are imported on first access, so importing the plugin module
(``harel_store_sqlite._plugin``) never loads ``sqlite3``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_sqlite.aio import AsyncSqliteStore
    from harel_store_sqlite.sync import SqliteStore

__all__ = ["AsyncSqliteStore", "SqliteStore"]

_LAZY = {
    "SqliteStore": "harel_store_sqlite.sync",
    "AsyncSqliteStore": "harel_store_sqlite.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``SqliteStore`` / ``AsyncSqliteStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_sqlite' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
