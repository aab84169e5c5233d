"""harel-store-rqlite: the rqlite ``ExecutionStore`` (sync over httpx, async on a worker thread).

The store classes are imported on first access, so importing the plugin module
(``harel_store_rqlite._plugin``) never loads httpx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_rqlite.aio import AsyncRqliteStore
    from harel_store_rqlite.sync import RqliteStore

__all__ = ["AsyncRqliteStore", "RqliteStore"]

_LAZY = {
    "RqliteStore": "harel_store_rqlite.sync",
    "AsyncRqliteStore": "harel_store_rqlite.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``RqliteStore`` / ``AsyncRqliteStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_rqlite' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
