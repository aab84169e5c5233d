"""``AsyncJsonDirStore``: the async twin, running :class:`JsonDirStore` in worker threads.

There is no second implementation: every coroutine hands the same call to the sync store in
``anyio.to_thread.run_sync``, so the event loop never blocks on the disk or the file lock
and the two flavours cannot drift apart.  A cancelled caller does not abandon an operation
half-way: the worker thread finishes it (anyio's default), the caller just stops waiting.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import anyio.to_thread
from harel.model import Execution, ExecutionPage, Status
from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)

from harel_example_jsondir._capabilities import CAPABILITIES
from harel_example_jsondir._url import DEFAULT_LOCK_TIMEOUT, parse_url
from harel_example_jsondir.sync import JsonDirStore

T = TypeVar("T")


class AsyncJsonDirStore:
    """An :class:`~harel.store.contract.AsyncExecutionStore` over a jsondir directory.

    Same data, guarantees and locking as :class:`JsonDirStore`; a sync and an async store
    may share one directory.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        fsync: bool = True,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.sync_store = JsonDirStore(
            directory, trace_max=trace_max, fsync=fsync, lock_timeout=lock_timeout
        )

    @classmethod
    async def from_url(cls, url: str, **knobs: Any) -> Self:
        """``jsondir:///abs/dir`` or ``jsondir://relative/dir`` (the folders are made off-loop)."""
        options = parse_url(url, **knobs)
        return await anyio.to_thread.run_sync(functools.partial(cls, **options.as_kwargs()))

    @property
    def trace_max(self) -> int | None:
        """Steps retained per execution (falsy = unbounded); shared with ``sync_store``."""
        return self.sync_store.trace_max

    @trace_max.setter
    def trace_max(self, value: int | None) -> None:
        self.sync_store.trace_max = value

    @property
    def directory(self) -> Path:
        """The absolute directory holding the data."""
        return self.sync_store.directory

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"

    async def _run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))

    async def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return await self._run(self.sync_store.load, execution_id)

    async def load_for_event(
        self, execution_id: str, event_id: str
    ) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return await self._run(self.sync_store.load_for_event, execution_id, event_id)

    async def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone."""
        await self._run(self.sync_store.save, exe)

    async def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step atomically (see :meth:`JsonDirStore.commit`)."""
        await self._run(
            self.sync_store.commit, exe, emits, processed_event_id, timers, spawns, trace
        )

    async def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return await self._run(self.sync_store.is_processed, execution_id, event_id)

    async def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return await self._run(self.sync_store.pending_outbox, limit=limit)

    async def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        await self._run(self.sync_store.ack_outbox, seq)

    async def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return await self._run(self.sync_store.pending_spawns, limit=limit)

    async def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        await self._run(self.sync_store.ack_spawn, seq)

    async def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending."""
        return await self._run(self.sync_store.due_timers, now, limit=limit)

    async def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        await self._run(self.sync_store.delete_timer, execution_id, path, fire_at)

    async def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return await self._run(self.sync_store.read_trace, execution_id)

    async def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        await self._run(self.sync_store.append_trace, execution_id, entry)

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
            self.sync_store.list_executions,
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )

    async def close(self) -> None:
        """Nothing to release."""
        self.sync_store.close()
