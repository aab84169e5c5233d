"""What both memory stores share: the dataset, the plan, ``trace_max`` and reopening."""

from __future__ import annotations

from typing import ClassVar, Self

from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.memory._capabilities import CAPABILITIES
from harel.store.memory._plan import PLAN, MemoryPlan
from harel.store.memory._tables import MemoryData


class MemoryStoreBase:
    """Construction shared by :class:`DictStore` and :class:`AsyncDictStore`.

    Every store over one :class:`MemoryData` sees the same executions, outbox, timers and
    traces; nothing is ever copied by reference (rows hold JSON text).
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self, data: MemoryData | None = None, *, trace_max: int | None = DEFAULT_TRACE_MAX
    ) -> None:
        self.data = data if data is not None else MemoryData()
        self.trace_max = trace_max
        self._plan: MemoryPlan = PLAN

    def __repr__(self) -> str:
        return f"{type(self).__name__}(executions={len(self.data.executions)})"

    def reopen(self) -> Self:
        """A second store over the same data (what a restart looks like in memory)."""
        return type(self)(self.data, trace_max=self.trace_max)
