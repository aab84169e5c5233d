"""Fixtures of the libSQL backend's tests: the conformance harness and store factories (local
files run by libSQL's own engine)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from harel_store_libsql import AsyncLibsqlStore, LibsqlStore
from harel_store_libsql.testing import LibsqlHarness


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def harel_harness(tmp_path: Path) -> Iterator[LibsqlHarness]:
    """A fresh, empty database file per test (the conformance kit's entry point)."""
    harness = LibsqlHarness(tmp_path / "kit.db")
    yield harness
    harness.destroy()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[LibsqlStore]:
    s = LibsqlStore(str(db_path))
    yield s
    s.close()


@pytest.fixture
async def astore(db_path: Path) -> AsyncIterator[AsyncLibsqlStore]:
    s = await AsyncLibsqlStore.open(str(db_path))
    yield s
    await s.close()
