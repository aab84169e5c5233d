"""harel-store-mongo: the MongoDB ``ExecutionStore`` (sync over PyMongo, async over PyMongo's
``AsyncMongoClient`` or an injected motor client).

The store classes are imported on first access, so importing the plugin module
(``harel_store_mongo._spec``) never loads ``pymongo``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harel.store.author import lazy_exports

if TYPE_CHECKING:
    from harel_store_mongo.aio import AsyncMongoStore
    from harel_store_mongo.sync import MongoStore

__all__ = ["AsyncMongoStore", "MongoStore"]

__getattr__ = lazy_exports(
    __name__, {"MongoStore": "harel_store_mongo.sync", "AsyncMongoStore": "harel_store_mongo.aio"}
)
