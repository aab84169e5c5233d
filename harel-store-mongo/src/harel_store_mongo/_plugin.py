"""Registers the MongoDB backend with harel's store registry (imports no driver, no engine)."""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl

from harel_store_mongo._capabilities import CAPABILITIES
from harel_store_mongo._legacy import VARIABLES as LEGACY_VARIABLES

DISTRIBUTION = "harel-store-mongo"


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``mongodb://`` and ``mongodb+srv://`` (sync ``MongoStore``, async
    ``AsyncMongoStore``)."""
    register(
        StoreBackend(
            name="mongo",
            schemes=("mongodb", "mongodb+srv"),
            store="harel_store_mongo.sync:MongoStore",
            async_store="harel_store_mongo.aio:AsyncMongoStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_mongo.testing:harness_from_url",
            # No MongoDB server runs here: the reserved host mongomock.invalid makes the harness
            # use mongomock (in-process, so its harness offers no url() and claims neither
            # persistent nor multi_process); HAREL_TEST_MONGO_URL points at a real server.
            local_url="mongodb://mongomock.invalid/",
            description="MongoDB (PyMongo; async over AsyncMongoClient or motor): one "
            "update_one per commit",
            exists="harel_store_mongo._exists:store_exists",
            legacy_env="harel_store_mongo._legacy:url_from_env",
            legacy_vars=LEGACY_VARIABLES,
        )
    )
