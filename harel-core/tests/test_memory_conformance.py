"""The conformance kit against the in-memory reference stores (DictStore / AsyncDictStore)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from harel.conformance import ConformanceSuite, StoreHarness
from harel.store.contract import Capabilities
from harel.store.memory import CAPABILITIES, AsyncDictStore, DictStore, MemoryData


class MemoryDataHarness(StoreHarness):
    """Every store opened shares one MemoryData: that is a reopen for the memory stores."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self) -> None:
        self.data = MemoryData()

    def open_sync(self) -> DictStore:
        return DictStore(self.data)

    async def open_async(self) -> AsyncDictStore:
        return AsyncDictStore(self.data)


@pytest.fixture
def harel_harness() -> Iterator[MemoryDataHarness]:
    harness = MemoryDataHarness()
    yield harness
    harness.destroy()


class TestMemoryConformance(ConformanceSuite):
    """DictStore and AsyncDictStore pass the whole kit, strict, with no expected failures."""

    expected_failures: ClassVar[dict[str, str]] = {}
