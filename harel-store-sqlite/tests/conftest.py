"""Fixtures of the SQLite backend's tests: the conformance harness and store factories."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from harel_store_sqlite import AsyncSqliteStore, SqliteStore
from harel_store_sqlite.testing import SqliteHarness


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def harel_harness(tmp_path: Path) -> Iterator[SqliteHarness]:
    """A fresh, empty database file per test (the conformance kit's entry point)."""
    harness = SqliteHarness(tmp_path / "kit.db")
    yield harness
    harness.destroy()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(str(db_path))
    yield s
    s.close()


@pytest.fixture
async def astore(db_path: Path) -> AsyncIterator[AsyncSqliteStore]:
    s = await AsyncSqliteStore.open(str(db_path))
    yield s
    await s.close()
