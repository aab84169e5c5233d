"""The memory backend's conformance harness (used by ``harel conformance memory://``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from harel.conformance.harness import StoreHarness
from harel.store.common.urls import parse_store_url
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreURL
from harel.store.memory import CAPABILITIES, AsyncDictStore, DictStore, MemoryData


class MemoryHarness(StoreHarness):
    """One private :class:`MemoryData`; every store opened through it shares that data."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data if data is not None else MemoryData()

    def open_sync(self) -> DictStore:
        """A new DictStore over the harness's data."""
        return DictStore(self.data)

    async def open_async(self) -> AsyncDictStore:
        """A new AsyncDictStore over the harness's data."""
        return AsyncDictStore(self.data)

    def destroy(self) -> None:
        """Forget the dataset: stores opened from now on start from an empty one."""
        self.data = MemoryData()

    def describe(self) -> str:
        """``memory (in-process)``."""
        return "memory (in-process)"


def harness_from_url(url: str, workdir: Path) -> MemoryHarness:
    """A harness over a fresh, empty, private dataset (``memory://NAME`` is not touched)."""
    parsed = parse_store_url(url)
    if parsed.scheme != "memory":
        raise InvalidStoreURL(f"{parsed.redacted!r} is not a memory:// URL")
    parsed.knobs(frozenset())
    return MemoryHarness()
