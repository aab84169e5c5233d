"""harel-store-mongo: the MongoDB ``ExecutionStore`` (sync over PyMongo, async over PyMongo's
``AsyncMongoClient`` or an injected motor client).

The store classes are imported on first access, so importing the plugin module
(``harel_store_mongo._plugin``) never loads ``pymongo``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel_store_mongo.aio import AsyncMongoStore
    from harel_store_mongo.sync import MongoStore

__all__ = ["AsyncMongoStore", "MongoStore"]

_LAZY = {
    "MongoStore": "harel_store_mongo.sync",
    "AsyncMongoStore": "harel_store_mongo.aio",
}


def __getattr__(name: str) -> Any:
    """Import ``MongoStore`` / ``AsyncMongoStore`` on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harel_store_mongo' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
