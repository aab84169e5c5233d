"""AsyncRedisStore under trio: redis.asyncio is asyncio-only, so the store runs RedisStore in
worker threads (before: a coroutine never awaited and a trio TypeError)."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis
from harel.model import Execution
from harel.store.errors import UnsupportedEventLoop
from harel_store_redis import AsyncRedisStore
from harel_store_redis.testing import RedisHarness

pytest.importorskip("trio")

pytestmark = [pytest.mark.anyio, pytest.mark.harel_trio]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_from_url_under_trio_commits_through_the_sync_twin(
    harel_harness: RedisHarness,
) -> None:
    store = await AsyncRedisStore.from_url(harel_harness.url(), connect_retries=0)
    try:
        assert isinstance(store, AsyncRedisStore)
        assert "redis" in repr(store).lower()
        exe = Execution(id="trio-1", definition_id="d")
        await store.commit(exe, [])
        loaded = await store.load("trio-1")
        assert loaded is not None and loaded.version == exe.version == 1
        assert "execution" in harel_harness.footprint("trio-1")
    finally:
        await store.close()


async def test_an_asyncio_client_under_trio_is_a_typed_error() -> None:
    client = aioredis.Redis()
    with pytest.raises(UnsupportedEventLoop, match=r"asyncio only.*from_url"):
        await AsyncRedisStore.open(client)
