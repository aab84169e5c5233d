"""harel-store-sqlite: the SQLite ``ExecutionStore`` (sync over sqlite3; async twin on one
worker thread).

The store classes are imported on first access, so importing the plugin module
(``harel_store_sqlite._spec``) never loads ``sqlite3``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_sqlite.aio import AsyncSqliteStore
    from harel_store_sqlite.sync import SqliteStore

__all__ = ["AsyncSqliteStore", "SqliteStore"]

_LAZY = {
    "SqliteStore": "harel_store_sqlite.sync",
    "AsyncSqliteStore": "harel_store_sqlite.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
