"""harel-store-libsql: the libSQL ``ExecutionStore`` (sync over the ``libsql`` driver; async twin
on one worker thread).

The store classes are imported on first access, so importing the plugin module
(``harel_store_libsql._plugin``) never loads the ``libsql`` driver.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_libsql.aio import AsyncLibsqlStore
    from harel_store_libsql.sync import LibsqlStore

__all__ = ["AsyncLibsqlStore", "LibsqlStore"]

_LAZY = {
    "LibsqlStore": "harel_store_libsql.sync",
    "AsyncLibsqlStore": "harel_store_libsql.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``LibsqlStore`` / ``AsyncLibsqlStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_libsql' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
