"""``AsyncDictStore``: the asynchronous in-memory reference store (same plan as DictStore).

The tables never block on IO, so no request suspends: a cancelled call is either not started
or complete, and ``exe.version`` always tells which."""

from __future__ import annotations

from typing import Any, Self, TypeVar

from harel.store.common import AsyncPlanStore, drive
from harel.store.memory._options import data_for_url
from harel.store.memory._plan import MemoryPlan, Plan
from harel.store.memory._store import MemoryStoreBase

T = TypeVar("T")


class AsyncDictStore(MemoryStoreBase, AsyncPlanStore[MemoryPlan]):
    """In-memory :class:`~harel.store.contract.AsyncExecutionStore`: every contract method
    (from :class:`~harel.store.common.AsyncPlanStore`) runs one plan against the tables."""

    @classmethod
    async def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(data_for_url(url), **knobs)

    async def _run(self, operation: Plan[T]) -> T:
        """Run the plan to its end without suspending (the tables never wait on IO)."""
        return drive(operation, self.data.execute)

    async def _settle(self, operation: Plan[T]) -> tuple[T, bool]:
        """Overridden because :meth:`_run` never suspends: a write cannot be interrupted once
        started, so the base class's shielded task (one task per write) is pure overhead."""
        return drive(operation, self.data.execute), False

    async def close(self) -> None:
        """Nothing to release."""
