"""Registers the rqlite backend with harel's store registry.

Imports no HTTP client and no engine: ``harel stores`` lists the backend (and the kit checks
it) without loading httpx.
"""

from __future__ import annotations

from collections.abc import Callable

from harel.registry import StoreBackend, hookimpl
from harel.store.contract import Capabilities

DISTRIBUTION = "harel-store-rqlite"

CAPABILITIES = Capabilities(
    persistent=True,
    multi_process=True,
    ordered_listing=True,
    exact_pages=True,
)
"""Raft-replicated and on disk, shared by every process that reaches the cluster, keyset
listing by id, exact pages."""


@hookimpl
def harel_register_stores(register: Callable[[StoreBackend], None]) -> None:
    """Register ``rqlite://`` and ``rqlites://`` (``RqliteStore``, ``AsyncRqliteStore``).

    ``local_url`` is ``rqlite://local-fake``: not a store URL but the placeholder on which the
    backend's test harness starts a local fake rqlite node per dataset (no rqlite binary can
    be installed where the all-backends tests run); ``HAREL_TEST_RQLITE_URL`` points the tests
    at a real node instead.
    """
    register(
        StoreBackend(
            name="rqlite",
            schemes=("rqlite", "rqlites"),
            store="harel_store_rqlite.sync:RqliteStore",
            async_store="harel_store_rqlite.aio:AsyncRqliteStore",
            capabilities=CAPABILITIES,
            distribution=DISTRIBUTION,
            harness="harel_store_rqlite.testing:harness_from_url",
            local_url="rqlite://local-fake",
            exists="harel_store_rqlite._exists:store_exists",
            legacy_env="harel_store_rqlite._legacy:url_from_env",
            legacy_vars=("STM_RQLITE_URL",),
            description="rqlite over its HTTP API (httpx): one request per commit, strong reads",
        )
    )
