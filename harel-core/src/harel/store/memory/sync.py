"""``DictStore``: the synchronous in-memory reference store (thread-safe, copy semantics)."""

from __future__ import annotations

from typing import Any, Self, TypeVar

from harel.store.common import PlanStore, drive
from harel.store.memory._options import data_for_url
from harel.store.memory._plan import MemoryPlan, Plan
from harel.store.memory._store import MemoryStoreBase

T = TypeVar("T")


class DictStore(MemoryStoreBase, PlanStore[MemoryPlan]):
    """In-memory :class:`~harel.store.contract.ExecutionStore`: every contract method (from
    :class:`~harel.store.common.PlanStore`) runs one plan against the shared tables."""

    @classmethod
    def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(data_for_url(url), **knobs)

    def _run(self, operation: Plan[T]) -> T:
        """Run the plan against the tables (each request, or transaction, under their lock)."""
        return drive(operation, self.data.execute)

    def close(self) -> None:
        """Nothing to release."""
