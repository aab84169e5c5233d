"""What the tutorial store promises beyond the kit: its URLs, its named datasets, ``close``."""

from __future__ import annotations

import pytest
from harel.model import Execution
from harel.registry import open_async_store, open_store
from harel.store.errors import InvalidStoreOption, InvalidStoreURL, StoreError
from harel_tutorial_store import AsyncTutorialStore, TutorialStore


def test_a_named_dataset_is_shared_and_a_bare_url_is_private() -> None:
    first = open_store("tutorial://shared-by-name")
    exe = Execution(definition_id="d")
    first.save(exe)
    again = TutorialStore.from_url("tutorial://shared-by-name")
    loaded = again.load(exe.id)
    assert loaded is not None and loaded.version == 1
    assert open_store("tutorial://").load(exe.id) is None
    assert TutorialStore().load(exe.id) is None


def test_knobs_come_from_the_url_or_keywords_and_are_checked() -> None:
    assert TutorialStore.from_url("tutorial://?trace_max=5").trace_max == 5
    assert TutorialStore.from_url("tutorial://?trace_max=5", trace_max=None).trace_max is None
    with pytest.raises(InvalidStoreURL, match="trace_mx"):
        TutorialStore.from_url("tutorial://?trace_mx=5")
    with pytest.raises(InvalidStoreOption, match="trace_max"):
        TutorialStore(trace_max=-1)
    with pytest.raises(InvalidStoreURL, match="server") as refused:
        TutorialStore.from_url("tutorial://user:hunter2@host:1")
    assert "hunter2" not in str(refused.value)


def test_a_closed_store_refuses_every_call() -> None:
    store = TutorialStore()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load("x")


@pytest.mark.anyio
async def test_the_async_store_shares_a_named_dataset_with_the_sync_one() -> None:
    sync = TutorialStore("async-and-sync")
    exe = Execution(definition_id="d")
    sync.save(exe)
    store = await open_async_store("tutorial://async-and-sync")
    try:
        assert isinstance(store, AsyncTutorialStore)
        loaded = await store.load(exe.id)
        assert loaded is not None and loaded.version == 1
    finally:
        await store.close()
