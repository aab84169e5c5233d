"""The memory backend's conformance harness (used by ``harel conformance memory://``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from harel.conformance.harness import StoreHarness
from harel.store.contract import Capabilities
from harel.store.memory._spec import CAPABILITIES, dataset_name
from harel.store.memory._tables import MemoryData
from harel.store.memory.aio import AsyncDictStore
from harel.store.memory.sync import DictStore


def footprint(data: MemoryData, execution_id: str) -> list[str]:
    """Every row and index entry ``data`` holds for ``execution_id``, one label each (read
    under the lock), so a purge that forgets a table or an index shows."""
    eid = execution_id
    with data.lock:
        labels = ["execution"] if eid in data.executions else []
        labels += [f"processed:{event}" for event in data.processed.get(eid, {})]
        labels += [f"timer:{path}" for path in data.timers.get(eid, {})]
        labels += [f"outbox:{s}" for s, row in data.outbox.items() if row.target_id == eid]
        labels += [f"spawn:{s}" for s, row in data.spawns.items() if row.parent_id == eid]
        labels += [f"trace:{index}" for index in data.trace.get(eid, {})]
        labels += ["trace-ring"] if eid in data.trace else []
        labels += ["trace-counter"] if eid in data.last_trace_index else []
        labels += ["work"] if eid in data.work else []
        labels += ["index:outbox"] if eid in data.outbox_of else []
        labels += ["index:spawns"] if eid in data.spawns_of else []
        labels += [f"index:id:{eid}" for key in data.ids if key == eid]
        labels += [f"index:due:{path}" for _, key, path in data.due if key == eid]
        labels += [f"index:age:{event}" for _, key, event in data.ages if key == eid]
        labels += [
            f"index:ready:{priority}"
            for priority, index in data.ready.items()
            for _, key in index
            if key == eid
        ]
        labels += ["index:leased" for _, key in data.leased if key == eid]
    return labels


class MemoryHarness(StoreHarness):
    """One private :class:`MemoryData`; every store opened through it shares that data.

    Memory is not persistent: :meth:`url` is ``None`` (no other process can reach the data).
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data if data is not None else MemoryData()

    def open_sync(self) -> DictStore:
        """A new DictStore over the harness's data."""
        return DictStore(self.data)

    async def open_async(self) -> AsyncDictStore:
        """A new AsyncDictStore over the harness's data."""
        return AsyncDictStore(self.data)

    def url(self) -> str | None:
        """``None``: another interpreter cannot open this dataset."""
        return None

    def footprint(self, execution_id: str) -> list[str]:
        """Everything the tables hold for ``execution_id`` (see :func:`footprint`)."""
        return footprint(self.data, execution_id)

    def destroy(self) -> None:
        """Forget the dataset: stores opened from now on start from an empty one."""
        self.data = MemoryData()

    def describe(self) -> str:
        """``memory (in-process)``."""
        return "memory (in-process)"


def harness_from_url(url: str, workdir: Path) -> MemoryHarness:
    """A harness over a fresh, empty, private dataset (``memory://NAME`` is not touched)."""
    dataset_name(url)  # validates the URL
    return MemoryHarness()
