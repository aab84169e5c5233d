"""Registers the SQLite backend with harel's store registry (imports no database driver)."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from harel.registry import StoreBackend, hookimpl

from harel_store_sqlite._capabilities import CAPABILITIES

DISTRIBUTION = "harel-store-sqlite"


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


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
            version=_version(),
            harness="harel_store_sqlite.testing:harness_from_url",
            local_url="sqlite:///{workdir}/harel.db",
            description="SQLite file (stdlib sqlite3; async over aiosqlite), WAL, one writer",
        )
    )
