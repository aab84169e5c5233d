"""Registers the SQLite backend with harel's store registry.

Imports no database driver and no engine: ``harel stores`` lists the backend (and the kit
checks it) without loading ``sqlite3``.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-store-sqlite"

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Durable file, safe across processes (SQLite file locks), keyset listing by id, exact pages."""


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``sqlite://`` (sync ``SqliteStore``, async ``AsyncSqliteStore``)."""
    register(
        StoreBackend(
            name="sqlite",
            schemes=("sqlite",),
            store="harel_store_sqlite.sync:SqliteStore",
            async_store="harel_store_sqlite.aio:AsyncSqliteStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_sqlite.testing:harness_from_url",
            local_url="sqlite:///{workdir}/harel.db",
            legacy_env="harel_store_sqlite._env:url_from_env",
            legacy_vars=("STM_STORE_DB",),
            exists="harel_store_sqlite._exists:store_exists",
            description="SQLite file (stdlib sqlite3; async over one worker thread), WAL",
        )
    )
