"""The reference implementation's constructor names keep working (docs/porting.md §1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from harel import Execution
from harel_store_libsql import AsyncLibsqlStore, LibsqlStore


def test_async_create_is_open(tmp_path: Path) -> None:
    path = str(tmp_path / "ported.db")

    async def main() -> None:
        store = await AsyncLibsqlStore.create(path, trace_max=7)
        try:
            assert isinstance(store, AsyncLibsqlStore)
            assert store.trace_max == 7
            await store.commit(Execution(id="e1", definition_id="d"), [])
        finally:
            await store.close()

    asyncio.run(main())
    again = LibsqlStore(path)
    try:
        loaded = again.load("e1")
        assert loaded is not None and loaded.version == 1
    finally:
        again.close()


def test_async_create_default_is_in_memory() -> None:
    async def main() -> None:
        store = await AsyncLibsqlStore.create()
        try:
            assert await store.load("nothing") is None
        finally:
            await store.close()

    asyncio.run(main())
