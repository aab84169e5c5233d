"""Registers the libSQL backend with harel's store registry.

Imports no database driver and no engine: ``harel stores`` lists the backend (and the kit
checks it) without loading ``libsql``.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-store-libsql"

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Durable (a file, or a server), safe across processes (SQLite file locks locally; the server
orders writes remotely), keyset listing by id, exact pages."""


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``libsql://`` and ``libsql+file://`` (``LibsqlStore``, ``AsyncLibsqlStore``)."""
    register(
        StoreBackend(
            name="libsql",
            schemes=("libsql", "libsql+file"),
            store="harel_store_libsql.sync:LibsqlStore",
            async_store="harel_store_libsql.aio:AsyncLibsqlStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_libsql.testing:harness_from_url",
            local_url="libsql+file:///{workdir}/harel-libsql.db",
            exists="harel_store_libsql._exists:store_exists",
            legacy_env="harel_store_libsql._legacy:url_from_env",
            legacy_vars=("STM_LIBSQL_DB", "STM_LIBSQL_SYNC_URL", "STM_LIBSQL_AUTH_TOKEN"),
            description=(
                "libSQL (libsql driver): local file, sqld/Turso server or embedded replica; "
                "async over one worker thread"
            ),
        )
    )
