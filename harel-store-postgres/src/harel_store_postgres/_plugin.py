"""Registers the PostgreSQL backend with harel's store registry.

Imports neither psycopg nor the engine: listing backends (``harel stores``) stays cheap and
works even when the driver is broken.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-store-postgres"

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""A server-side durable database shared by any number of processes; listing is a keyset over
the ``id`` index, so pages are ordered by id and exact."""

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""The server the tests use when ``HAREL_TEST_POSTGRES_URL`` is not set (the kit's harness
makes a fresh schema per run there and drops it afterwards)."""


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``postgresql://`` / ``postgres://`` (``PostgresStore``, ``AsyncPostgresStore``)."""
    register(
        StoreBackend(
            name="postgres",
            schemes=("postgres", "postgresql"),
            store="harel_store_postgres.sync:PostgresStore",
            async_store="harel_store_postgres.aio:AsyncPostgresStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_postgres.testing:harness_from_url",
            local_url=LOCAL_URL,
            description="PostgreSQL (psycopg 3 + connection pool); one round trip per commit",
            legacy_env="harel_store_postgres._legacy:url_from_env",
            legacy_vars=("STM_POSTGRES_DSN",),
            exists="harel_store_postgres._exists:store_exists",
        )
    )
