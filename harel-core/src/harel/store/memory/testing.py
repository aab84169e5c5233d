"""The memory backend's conformance harness (used by ``harel conformance memory://``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from harel.conformance.harness import StoreHarness
from harel.store.contract import Capabilities
from harel.store.memory._capabilities import CAPABILITIES
from harel.store.memory._index import Owned
from harel.store.memory._options import dataset_name
from harel.store.memory._tables import MemoryData
from harel.store.memory.aio import AsyncDictStore
from harel.store.memory.sync import DictStore


def footprint(data: MemoryData, execution_id: str) -> list[str]:
    """Every record (and index entry) ``data`` holds for ``execution_id``, one label each (read
    under the lock)."""
    with data.lock:
        labels = ["execution"] if execution_id in data.executions else []
        labels += [f"processed:{ev}" for (eid, ev) in data.processed if eid == execution_id]
        labels += [f"timer:{path}" for (eid, path) in data.timers if eid == execution_id]
        labels += [f"outbox:{s}" for s, row in data.outbox.items() if row.target_id == execution_id]
        labels += [f"spawn:{s}" for s, row in data.spawns.items() if row.parent_id == execution_id]
        labels += [f"trace:{index}" for index in data.trace.get(execution_id, {})]
        if execution_id in data.trace:
            labels.append("trace-ring")
        if execution_id in data.last_trace_index:
            labels.append("trace-counter")
        if execution_id in data.work:
            labels.append("work")
        labels += _index_labels(data, execution_id)
    return labels


def _index_labels(data: MemoryData, execution_id: str) -> list[str]:
    """Index entries left for ``execution_id`` (so a purge that forgets an index shows)."""
    owned: dict[str, Owned[Any]] = {
        "marks": data.marks_of,
        "timers": data.timers_of,
        "outbox": data.outbox_of,
        "spawns": data.spawns_of,
    }
    labels = [f"index:{name}" for name, index in owned.items() if execution_id in index.by_id]
    labels += [f"index:id:{eid}" for eid in data.ids.keys if eid == execution_id]
    labels += [f"index:due:{path}" for _, eid, path in data.due.keys if eid == execution_id]
    labels += [f"index:age:{event}" for _, eid, event in data.ages.keys if eid == execution_id]
    labels += [
        f"index:ready:{priority}"
        for priority, index in data.ready.items()
        for _, key in index.keys
        if key == execution_id
    ]
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
