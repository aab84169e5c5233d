"""``JsonDirStore``: the synchronous jsondir store (executions as JSON files in a directory).

Lifecycle, one drive loop and one line per contract method: every operation is a plan of
:mod:`harel_example_jsondir._plan`, run whole under the directory lock by :meth:`_run`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import drive
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    DEFAULT_TRACE_MAX,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)

from harel_example_jsondir import _plan
from harel_example_jsondir._files import JsonDirectory
from harel_example_jsondir._options import DEFAULT_LOCK_TIMEOUT, parse_url
from harel_example_jsondir._plugin import CAPABILITIES

T = TypeVar("T")


class JsonDirStore:
    """An :class:`~harel.store.contract.ExecutionStore` over a directory of JSON files.

    Every operation holds the directory's file lock, so any number of store objects, threads
    and processes may share one directory; every commit and purge is all-or-nothing on disk,
    including across a crash (see :mod:`harel_example_jsondir._files`).  Holds no open file
    between calls.  Correct rather than fast: each operation reads ``state.json``.
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
        """Open (creating it when missing) the store in ``directory``; blocks on the lock."""
        self._dir = JsonDirectory(directory, fsync=fsync, lock_timeout=lock_timeout)
        self.trace_max = trace_max
        self._run(_plan.open_directory())

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """``jsondir:///abs/dir`` or ``jsondir://relative/dir`` (options: see ``_options``)."""
        return cls(**parse_url(url, **knobs).as_kwargs())

    @property
    def directory(self) -> Path:
        """The absolute directory holding the data."""
        return self._dir.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._dir.root)!r})"

    def _run(self, plan: _plan.Plan[T]) -> T:
        with self._dir.locked():
            return drive(plan, self._dir.execute)

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        return self._run(_plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        return self._run(_plan.load_for_event(execution_id, event_id))

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
        """Write one step atomically: CAS, outbox, dedupe mark, timers, spawns, trace."""
        args = (exe, emits, processed_event_id, timers, spawns, trace, self.trace_max)
        self._run(_plan.commit(*args))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(_plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        return self._run(_plan.pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(_plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        return self._run(_plan.pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(_plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, id, path)``."""
        return self._run(_plan.due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(_plan.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._run(_plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        self._run(_plan.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id (keyset cursor, exact pages)."""
        return self._run(_plan.list_executions(status, definition_id, roots_only, limit, cursor))

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all that belongs to it atomically; whether it was stored."""
        return self._run(_plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, one short write per batch."""
        return self._run(_plan.prune_processed(older_than, batch_size))

    def close(self) -> None:
        """Nothing to release: the store holds no open file between calls."""
