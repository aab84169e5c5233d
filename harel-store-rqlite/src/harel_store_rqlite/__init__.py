"""harel-store-rqlite: the rqlite ``ExecutionStore`` (sync over httpx, async on a worker thread).

The store classes are imported on first access, so importing the plugin module
(``harel_store_rqlite._spec``) never loads httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_rqlite.aio import AsyncRqliteStore
    from harel_store_rqlite.sync import RqliteStore

__all__ = ["AsyncRqliteStore", "RqliteStore"]

_LAZY = {
    "RqliteStore": "harel_store_rqlite.sync",
    "AsyncRqliteStore": "harel_store_rqlite.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
