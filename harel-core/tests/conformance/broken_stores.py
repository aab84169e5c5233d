"""Deliberately broken memory stores: each has one classic backend bug the kit must catch.

Each bug lives in a subclass of the memory stores' shared core, so the sync and the async
store are broken the same way.  ``BrokenHarness(name)`` opens stores with that core.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from harel.conformance.harness import StoreHarness
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import (
    cas_decision,
    committing,
    conflict,
    encode_cursor,
    encode_trace_step,
    listing_query,
    sweep_limit,
)
from harel.store.contract import Capabilities, DueTimer, Emit, Spawn, TimerOp
from harel.store.memory import (
    CAPABILITIES,
    AsyncDictStore,
    DictStore,
    MemoryData,
    _MemoryCore,
)


class SkippedCas(_MemoryCore):
    """Writes whatever version it is given: no compare-and-set at all."""

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        trace_max: int | None,
    ) -> None:
        with (
            committing(exe, emits, processed_event_id, timers, spawns, trace) as plan,
            self.data.lock,
        ):
            self._apply(plan, exe, trace_max)


class LeakyLoser(_MemoryCore):
    """Detects the conflict but writes the loser's side effects before raising."""

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        trace_max: int | None,
    ) -> None:
        with (
            committing(exe, emits, processed_event_id, timers, spawns, trace) as plan,
            self.data.lock,
        ):
            row = self.data.executions.get(plan.execution_id)
            found = None if row is None else row.version
            if cas_decision(plan.expected_version, found) == "conflict":
                for emit in plan.emits:  # the bug: side writes before the CAS verdict
                    self.data.outbox[self.data.next_seq] = (emit.target_id, emit.event_json)
                    self.data.next_seq += 1
                raise conflict(plan, found)
            self._apply(plan, exe, trace_max)


class UnguardedDeleteTimer(_MemoryCore):
    """``delete_timer`` removes the timer whatever ``fire_at`` it holds now."""

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        with self.data.lock:
            self.data.timers.pop((execution_id, path), None)


class OffByOneRing(_MemoryCore):
    """Keeps ``trace_max + 1`` steps."""

    def _append_trace_locked(self, execution_id: str, body: str, trace_max: int | None) -> None:
        super()._append_trace_locked(execution_id, body, trace_max + 1 if trace_max else None)


class SkippingCursor(_MemoryCore):
    """Its cursor resumes one row too late, so every page boundary loses a row."""

    def list_executions(
        self,
        status: Iterable[Status] | None,
        definition_id: str | None,
        roots_only: bool,
        limit: int,
        cursor: str | None,
    ) -> ExecutionPage:
        page = super().list_executions(status, definition_id, roots_only, limit, cursor)
        if page.next_cursor is None:
            return page
        query = listing_query(
            status=status, definition_id=definition_id, roots_only=roots_only, limit=1, cursor=None
        )
        with self.data.lock:
            ids = sorted(
                row.summary.id
                for row in self.data.executions.values()
                if query.matches(row.summary)
            )
        last = page.items[-1].id
        after = ids.index(last) + 1
        if after >= len(ids) - 1:
            return ExecutionPage(items=page.items, next_cursor=None)
        return ExecutionPage(items=page.items, next_cursor=encode_cursor(ids[after]))


class TornCommit(_MemoryCore):
    """Writes the snapshot and outbox, then encodes the trace step and fails half-way."""

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None,
        timers: Sequence[TimerOp],
        spawns: Sequence[Spawn],
        trace: dict[str, Any] | None,
        trace_max: int | None,
    ) -> None:
        with (
            committing(exe, emits, processed_event_id, timers, spawns, None) as plan,
            self.data.lock,
        ):
            row = self.data.executions.get(plan.execution_id)
            found = None if row is None else row.version
            if cas_decision(plan.expected_version, found) == "conflict":
                raise conflict(plan, found)
            self._apply(plan, exe, trace_max)
            if trace is not None:  # the bug: encoding after writing
                self._append_trace_locked(plan.execution_id, encode_trace_step(trace), trace_max)


class UnsortedTimers(_MemoryCore):
    """Returns due timers in insertion order (and applies ``limit`` before sorting)."""

    def due_timers(self, now: float, limit: int | None) -> list[DueTimer]:
        sweep_limit(limit)
        with self.data.lock:
            due = [(e, p, f) for (e, p), f in self.data.timers.items() if f <= now]
        return due[:limit]


BROKEN: dict[str, type[_MemoryCore]] = {
    "skipped_cas": SkippedCas,
    "leaky_loser": LeakyLoser,
    "unguarded_delete_timer": UnguardedDeleteTimer,
    "off_by_one_ring": OffByOneRing,
    "skipping_cursor": SkippingCursor,
    "torn_commit": TornCommit,
    "unsorted_timers": UnsortedTimers,
}


class BrokenHarness(StoreHarness):
    """Memory stores whose shared core has the named bug."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, bug: str) -> None:
        self.core = BROKEN[bug](MemoryData())

    @classmethod
    def named(cls, name: str) -> StoreHarness:
        """A broken harness by bug name, or ``correct``/``undeclared``/``unordered``."""
        special: dict[str, type[StoreHarness]] = {
            "correct": CorrectHarness,
            "undeclared": UndeclaredHarness,
            "unordered": UnorderedHarness,
        }
        return special[name]() if name in special else cls(name)

    def open_sync(self) -> DictStore:
        store = DictStore(self.core.data)
        store._core = self.core
        return store

    async def open_async(self) -> AsyncDictStore:
        store = AsyncDictStore(self.core.data)
        store._core = self.core
        return store


class UndeclaredHarness(StoreHarness):
    """A correct store whose harness forgets to declare its capabilities."""

    def __init__(self) -> None:
        self.data = MemoryData()

    def open_sync(self) -> DictStore:
        return DictStore(self.data)

    async def open_async(self) -> AsyncDictStore:
        return AsyncDictStore(self.data)


class CorrectHarness(UndeclaredHarness):
    """The unbroken memory stores."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES


class UnorderedHarness(UndeclaredHarness):
    """A correct store declaring that listing is neither ordered nor exact (for strict mode)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        persistent=False, multi_process=False, ordered_listing=False, exact_pages=False
    )


__all__ = [
    "BROKEN",
    "BrokenHarness",
    "CorrectHarness",
    "UndeclaredHarness",
    "UnorderedHarness",
]
