"""AsyncMongoStore under trio: PyMongo's async client and motor are asyncio-only, so the store
runs MongoStore in worker threads."""

from __future__ import annotations

from typing import Any

import pytest
from harel.model import Execution
from harel.store.errors import UnsupportedEventLoop
from harel_store_mongo import AsyncMongoStore

pytest.importorskip("trio")

pytestmark = [pytest.mark.anyio, pytest.mark.harel_trio]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_harness_store_under_trio_commits_through_the_sync_twin(harness: Any) -> None:
    store = await harness.open_async()
    try:
        assert isinstance(store, AsyncMongoStore)
        exe = Execution(id="trio-1", definition_id="d")
        await store.commit(exe, [])
        loaded = await store.load("trio-1")
        assert loaded is not None and loaded.version == exe.version == 1
        assert "execution" in harness.footprint("trio-1")
    finally:
        await store.close()


async def test_an_asyncio_client_under_trio_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedEventLoop, match=r"asyncio only.*from_url"):
        await AsyncMongoStore.open(object())
