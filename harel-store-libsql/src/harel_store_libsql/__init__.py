"""harel-store-libsql: the libSQL ``ExecutionStore`` (sync over the ``libsql`` driver; async twin
on one worker thread).

The store classes are imported on first access, so importing the spec (``harel_store_libsql._spec``,
the plugin the ``harel.stores`` entry point names) never loads the ``libsql`` driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_libsql.aio import AsyncLibsqlStore
    from harel_store_libsql.sync import LibsqlStore

__all__ = ["AsyncLibsqlStore", "LibsqlStore"]

_LAZY = {
    "LibsqlStore": "harel_store_libsql.sync",
    "AsyncLibsqlStore": "harel_store_libsql.aio",
}


__getattr__ = lazy_exports(__name__, _LAZY)
