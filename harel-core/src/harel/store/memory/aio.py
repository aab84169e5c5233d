"""``AsyncDictStore``: the asynchronous in-memory reference store (same plan as DictStore).

The tables never block on IO, so no request suspends: a cancelled call is either not started
or complete, and ``exe.version`` always tells which."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Self, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store import OutboxEntry, SpawnEntry, TimerOp
from harel.store.common import adrive, committing
from harel.store.contract import DEFAULT_PRUNE_BATCH, DueTimer, Emit, Spawn
from harel.store.memory._options import data_for_url
from harel.store.memory._plan import Plan, Request
from harel.store.memory._store import MemoryStoreBase

T = TypeVar("T")


class AsyncDictStore(MemoryStoreBase):
    """In-memory :class:`~harel.store.contract.AsyncExecutionStore`; every method runs one plan."""

    @classmethod
    async def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(data_for_url(url), **knobs)

    async def _execute(self, request: Request) -> Any:
        return self.data.execute(request)

    async def _run(self, plan: Plan[T]) -> T:
        return await adrive(plan, self._execute)

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return await self._run(self._plan.load(execution_id))

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return await self._run(self._plan.load_for_event(execution_id, event_id))

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        await self.commit(exe, [])

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step atomically (see the contract)."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            await self._run(self._plan.commit(prepared, self.trace_max))

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self._plan.is_processed(execution_id, event_id))

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return await self._run(self._plan.pending_outbox(limit))

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._run(self._plan.ack("outbox", seq))

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return await self._run(self._plan.pending_spawns(limit))

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._run(self._plan.ack("spawns", seq))

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending."""
        return await self._run(self._plan.due_timers(now, limit))

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._run(self._plan.delete_timer(execution_id, path, fire_at))

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return await self._run(self._plan.read_trace(execution_id))

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        await self._run(self._plan.append_trace(execution_id, entry, self.trace_max))

    async def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id."""
        return await self._run(
            self._plan.list_executions(status, definition_id, roots_only, limit, cursor)
        )

    async def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove a finished execution and all it owns; whether it was stored."""
        return await self._run(self._plan.purge(execution_id, force))

    async def prune_processed(
        self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``; how many were dropped."""
        return await self._run(self._plan.prune_processed(older_than, batch_size))

    async def close(self) -> None:
        """Nothing to release."""
