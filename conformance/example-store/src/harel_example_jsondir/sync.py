"""``JsonDirStore``: the synchronous jsondir store (executions as JSON files in a directory)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import (
    cas_decision,
    committing,
    conflict,
    decode_event,
    decode_execution,
    decode_trace_step,
    encode_trace_step,
    listing_query,
    loads,
    page_from_probe,
    sweep_limit,
    trace_keep_from,
)
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
from harel.store.errors import ExecutionNotFound

from harel_example_jsondir import _layout
from harel_example_jsondir._capabilities import CAPABILITIES
from harel_example_jsondir._files import JsonDirectory
from harel_example_jsondir._plan import StoreState, TraceRing, commit_writes
from harel_example_jsondir._url import DEFAULT_LOCK_TIMEOUT, parse_url


def _valid_id(execution_id: str) -> bool:
    if not isinstance(execution_id, str):
        raise TypeError(f"an execution id must be a str, got {type(execution_id).__name__}")
    return bool(execution_id)


class JsonDirStore:
    """An :class:`~harel.store.contract.ExecutionStore` over a directory of JSON files.

    Every operation holds the directory's file lock, so any number of store objects, threads
    and processes may share one directory; every commit is all-or-nothing on disk, including
    across a crash (see :mod:`harel_example_jsondir._files`).  Holds no open file between
    calls.  Correct rather than fast: each operation reads ``state.json``.
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
        self._dir = JsonDirectory(directory, fsync=fsync, lock_timeout=lock_timeout)
        self.trace_max = trace_max

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """``jsondir:///abs/dir`` or ``jsondir://relative/dir`` (options: see ``_url``)."""
        return cls(**parse_url(url, **knobs).as_kwargs())

    @property
    def directory(self) -> Path:
        """The absolute directory holding the data."""
        return self._dir.root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._dir.root)!r})"

    def _state(self) -> StoreState:
        return StoreState.parse(self._dir.read(_layout.STATE))

    def _ring(self, execution_id: str) -> TraceRing:
        return TraceRing.parse(self._dir.read(_layout.trace_path(execution_id)))

    def _document(self, execution_id: str) -> str | None:
        return self._dir.read(_layout.document_path(execution_id))

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None``."""
        if not _valid_id(execution_id):
            return None
        with self._dir.locked():
            text = self._document(execution_id)
        return None if text is None else decode_execution(text)

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed by that execution."""
        if not _valid_id(execution_id):
            return None, False
        with self._dir.locked():
            text = self._document(execution_id)
            seen = text is not None and event_id in self._state().processed.get(execution_id, ())
        return (None, False) if text is None else (decode_execution(text), seen)

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
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as plan:
            trace_keep_from(0, self.trace_max)  # a bad trace_max fails before any IO
            with self._dir.locked():
                state = self._state()
                found = state.version_of(plan.execution_id)
                if cas_decision(plan.expected_version, found) == "conflict":
                    raise conflict(plan, found)
                ring = self._ring(plan.execution_id) if plan.trace is not None else None
                self._dir.transact(commit_writes(state, plan, ring, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        with self._dir.locked():
            return event_id in self._state().processed.get(execution_id, ())

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first."""
        sweep_limit(limit)
        with self._dir.locked():
            rows = sorted(self._state().outbox.items())[:limit]
        return [OutboxEntry(seq, target, decode_event(event)) for seq, (target, event) in rows]

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        with self._dir.locked():
            state = self._state()
            if state.outbox.pop(seq, None) is not None:
                self._dir.transact([(_layout.STATE, state.dump())])

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first."""
        sweep_limit(limit)
        with self._dir.locked():
            rows = sorted(self._state().spawns.items())[:limit]
        return [
            SpawnEntry(seq, parent, child, root, loads(context))
            for seq, (parent, child, root, context) in rows
        ]

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        with self._dir.locked():
            state = self._state()
            if state.spawns.pop(seq, None) is not None:
                self._dir.transact([(_layout.STATE, state.dump())])

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, id, path)``."""
        sweep_limit(limit)
        with self._dir.locked():
            return self._state().due(now)[:limit]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        with self._dir.locked():
            state = self._state()
            if state.timers.get((execution_id, path)) == fire_at:
                del state.timers[(execution_id, path)]
                self._dir.transact([(_layout.STATE, state.dump())])

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        if not _valid_id(execution_id):
            return []
        with self._dir.locked():
            ring = self._ring(execution_id)
        return [decode_trace_step(body, index) for index, body in ring.ordered()]

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step outside a commit; unknown execution raises ``ExecutionNotFound``."""
        body = encode_trace_step(entry)
        trace_keep_from(0, self.trace_max)
        if not _valid_id(execution_id):
            raise ExecutionNotFound(execution_id)
        with self._dir.locked():
            if self._state().version_of(execution_id) is None:
                raise ExecutionNotFound(execution_id)
            ring = self._ring(execution_id)
            ring.append(body, self.trace_max)
            self._dir.transact([(_layout.trace_path(execution_id), ring.dump())])

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
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        if query.matches_nothing:
            return ExecutionPage()
        with self._dir.locked():
            summaries = self._state().summaries()
        rows = [
            summary
            for summary in summaries
            if (query.after is None or summary.id > query.after) and query.matches(summary)
        ]
        return page_from_probe(query, rows[: query.limit + 1])

    def close(self) -> None:
        """Nothing to release: the store holds no open file between calls."""
