"""AsyncDynamoDBStore under trio: aioboto3 is asyncio-only, so the store runs DynamoDBStore
(boto3) in worker threads."""

from __future__ import annotations

import pytest
from harel.model import Execution
from harel.store.errors import UnsupportedEventLoop
from harel_store_dynamodb import AsyncDynamoDBStore
from harel_store_dynamodb.testing import DynamoDBHarness

pytest.importorskip("trio")

pytestmark = [pytest.mark.anyio, pytest.mark.harel_trio]


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_open_under_trio_commits_through_the_sync_twin(harness: DynamoDBHarness) -> None:
    store = await harness.open_async()
    try:
        assert isinstance(store, AsyncDynamoDBStore)
        assert store.options.table == harness.table
        exe = Execution(id="trio-1", definition_id="d")
        await store.commit(exe, [])
        loaded = await store.load("trio-1")
        assert loaded is not None and loaded.version == exe.version == 1
    finally:
        await store.close()


async def test_an_injected_aiobotocore_client_under_trio_is_a_typed_error() -> None:
    with pytest.raises(UnsupportedEventLoop, match="asyncio only"):
        await AsyncDynamoDBStore.open("t", client=object())
