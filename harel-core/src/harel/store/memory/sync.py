"""``DictStore``: the synchronous in-memory reference store (thread-safe, copy semantics)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Self, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store import OutboxEntry, SpawnEntry, TimerOp
from harel.store.common import committing, drive
from harel.store.contract import DEFAULT_PRUNE_BATCH, DueTimer, Emit, Spawn
from harel.store.memory._options import data_for_url
from harel.store.memory._plan import Plan
from harel.store.memory._store import MemoryStoreBase

T = TypeVar("T")


class DictStore(MemoryStoreBase):
    """In-memory :class:`~harel.store.contract.ExecutionStore`; every method runs one plan."""

    @classmethod
    def from_url(cls, url: str = "memory://", **knobs: Any) -> Self:
        """``memory://`` is a fresh store; ``memory://NAME`` shares NAME's data in this process."""
        return cls(data_for_url(url), **knobs)

    def _run(self, plan: Plan[T]) -> T:
        return drive(plan, self.data.execute)

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._run(self._plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return self._run(self._plan.load_for_event(execution_id, event_id))

    def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        self.commit(exe, [])

    def commit(
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
            self._run(self._plan.commit(prepared, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(self._plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return self._run(self._plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(self._plan.ack("outbox", seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return self._run(self._plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(self._plan.ack("spawns", seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending."""
        return self._run(self._plan.due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(self._plan.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return self._run(self._plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        self._run(self._plan.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id."""
        return self._run(
            self._plan.list_executions(status, definition_id, roots_only, limit, cursor)
        )

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove a finished execution and all it owns; whether it was stored."""
        return self._run(self._plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``; how many were dropped."""
        return self._run(self._plan.prune_processed(older_than, batch_size))

    def close(self) -> None:
        """Nothing to release."""
