"""Deliberately broken memory stores: each has one classic backend bug the kit must catch.

Most bugs live in a subclass of the memory backend's sans-IO plan (``MemoryPlan``), so the
sync and the async store are broken the same way; a few need the store classes themselves or
a harness that claims what the store cannot do.  ``BrokenHarness.named(name)`` builds one.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pydantic_core
import pytest
from broken_claims import CLAIM_PLANS
from harel.conformance.harness import StoreHarness
from harel.model import ChildState, Event, Execution, ExecutionPage
from harel.store.common import (
    ListingQuery,
    PreparedCommit,
    PreparedEmit,
    PreparedImport,
    already_processed,
    base_holds,
    cas_decision,
    committing,
    conflict,
    encode_cursor,
    listing_query,
    page_from_probe,
)
from harel.store.common.validate import check_event_ref, check_prune, check_timer_ref
from harel.store.contract import FINISHED, Capabilities, DueTimer, ExecutionRecord
from harel.store.errors import AlreadyProcessed, ExecutionActive
from harel.store.memory import CAPABILITIES, AsyncDictStore, DictStore, MemoryData
from harel.store.memory._plan import (
    OWNED_TABLES,
    AddRelay,
    DeleteOwned,
    DropMarks,
    DropTimer,
    GetExecution,
    GetForEvent,
    MemoryPlan,
    OldMarks,
    OutboxRow,
    Plan,
    ScanDueTimers,
    ScanExecutions,
    StoredExecution,
    Transaction,
)
from harel.store.memory.testing import footprint
from pydantic import BaseModel

EVERYTHING = 10**9


def _unmarked_row(prepared: PreparedCommit) -> Plan[StoredExecution | None]:
    """The stored row, after refusing (``AlreadyProcessed``) a commit whose dedupe mark is
    already stored: the part of the commit rule the CAS bugs below keep."""
    if prepared.processed_event_id is None:
        row: StoredExecution | None = yield GetExecution(prepared.execution_id)
        return row
    row, marked = yield GetForEvent(prepared.execution_id, prepared.processed_event_id)
    if marked:
        raise already_processed(prepared, None if row is None else row.version)
    return row


class SkippedCas(MemoryPlan):
    """Writes whatever it is given: no compare-and-set at all (no fence, no dedupe check)."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        row = yield GetExecution(prepared.execution_id)
        yield from self._write_step(prepared, trace_max, row)


class LeakyLoser(MemoryPlan):
    """Detects the conflict but writes the loser's outbox entries before raising."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        row = yield GetExecution(prepared.execution_id)
        found = None if row is None else row.version
        try:
            yield from _unmarked_row(prepared)
        except AlreadyProcessed:
            refused = True
        else:
            refused = cas_decision(prepared.expected_version, found) == "conflict" or (
                row is not None and not base_holds(prepared, row.receipt(row.version))
            )
        if refused:
            for emit in prepared.emits:  # the bug: side writes before the verdict is raised
                yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
            yield from _unmarked_row(prepared)  # AlreadyProcessed when that is the verdict
            raise conflict(prepared, found)
        yield from self._write_step(prepared, trace_max, row)


class NoReceipts(MemoryPlan):
    """Writes receipts but never reads them: a re-sent stored commit is a ``StoreConflict``."""

    def _commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        row = yield from _unmarked_row(prepared)
        found = None if row is None else row.version
        if cas_decision(prepared.expected_version, found) == "conflict" or (
            row is not None and not base_holds(prepared, row.receipt(row.version))
        ):
            raise conflict(prepared, found)
        yield from self._write_step(prepared, trace_max, row)


class UnguardedDeleteTimer(MemoryPlan):
    """``delete_timer`` removes the timer whatever ``fire_at`` it holds now."""

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        execution_id, path, _ = check_timer_ref(execution_id, path, fire_at)
        yield DropTimer(execution_id, path)


class OffByOneRing(MemoryPlan):
    """Keeps ``trace_max + 1`` steps."""

    def _append_step(self, execution_id: str, body: str, trace_max: int | None) -> Plan[None]:
        yield from super()._append_step(execution_id, body, trace_max + 1 if trace_max else None)


def _everything(query: ListingQuery | None = None) -> ScanExecutions:
    """Every execution ``query`` matches (every execution without one), from the start."""
    if query is None:
        query = listing_query(
            status=None, definition_id=None, roots_only=False, limit=1, cursor=None
        )
    return ScanExecutions(dataclasses.replace(query, after=None, limit=EVERYTHING))


class SkippingCursor(MemoryPlan):
    """Its cursor resumes one row too late, so every page boundary loses a row."""

    def _page(self, query: ListingQuery) -> Plan[ExecutionPage]:
        page = yield from super()._page(query)
        if page.next_cursor is None:
            return page
        ids = [row.id for row in (yield _everything(query))]
        after = ids.index(page.items[-1].id) + 1
        if after >= len(ids) - 1:
            return ExecutionPage(items=page.items, next_cursor=None)
        return ExecutionPage(items=page.items, next_cursor=encode_cursor(ids[after]))


class OffsetCursor(MemoryPlan):
    """Pages by position (``OFFSET``): rows created or purged between pages shift the rest."""

    def _page(self, query: ListingQuery) -> Plan[ExecutionPage]:
        offset = int(query.after[1:]) if query.after else 0
        rows = yield _everything(query)
        end = offset + query.limit
        more = len(rows) > end
        return ExecutionPage(
            items=rows[offset:end], next_cursor=encode_cursor(f"#{end}") if more else None
        )


def _like(pattern: str, value: str) -> bool:
    """SQL ``LIKE`` (``%`` any run, ``_`` one character, ASCII case-insensitive)."""
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) is not None


class LikeDefinitionFilter(MemoryPlan):
    """Filters ``definition_id`` with ``LIKE`` instead of equality."""

    def _page(self, query: ListingQuery) -> Plan[ExecutionPage]:
        pattern = query.definition_id
        unfiltered = dataclasses.replace(query, definition_id=None, limit=EVERYTHING)
        rows = yield ScanExecutions(unfiltered)
        if pattern is not None:
            rows = [row for row in rows if _like(pattern, row.definition_id)]
        return page_from_probe(query, rows[: query.limit + 1])


class PurgeLeavesTimers(MemoryPlan):
    """``purge`` forgets the timers table."""

    def _purge(self, execution_id: str, force: bool) -> Plan[bool]:
        row = yield GetExecution(execution_id)
        if row is not None and not force and row.summary.status not in FINISHED:
            raise ExecutionActive(execution_id, row.summary.status.value)
        for table in OWNED_TABLES:
            if table != "timers":  # the bug
                yield DeleteOwned(table, execution_id)
        return row is not None


class PrefixPurge(MemoryPlan):
    """``purge`` deletes every execution whose id starts with the given one (``LIKE 'id%'``)."""

    def _purge(self, execution_id: str, force: bool) -> Plan[bool]:
        existed = yield from super()._purge(execution_id, force)
        rows = yield _everything()
        for row in rows:
            if row.id.startswith(execution_id) and row.id != execution_id:
                for table in OWNED_TABLES:
                    yield DeleteOwned(table, row.id)
        return existed


class PruneAtTheBoundary(MemoryPlan):
    """``prune_processed`` also drops marks recorded exactly at ``older_than`` (``<=``)."""

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        after = math.nextafter(older_than, math.inf)
        dropped = yield from super().prune_processed(after, batch_size)
        return dropped


class PruneOneBatch(MemoryPlan):
    """``prune_processed`` stops after its first batch."""

    def prune_processed(self, older_than: float, batch_size: int) -> Plan[int]:
        older_than, batch_size = check_prune(older_than, batch_size)

        def batch() -> Plan[int]:
            keys = yield OldMarks(older_than, batch_size)
            count: int = yield DropMarks(tuple(keys))
            return count

        dropped: int = yield Transaction(batch())
        return dropped


class GlobMarks(MemoryPlan):
    """``is_processed`` / ``load_for_event`` match the event id as a glob pattern."""

    def is_processed(self, execution_id: str, event_id: str) -> Plan[bool]:
        execution_id, event_id = check_event_ref(execution_id, event_id)
        rows = yield OldMarks(float("inf"), EVERYTHING)
        return any(
            mark_id == execution_id and fnmatch.fnmatchcase(mark_event, event_id)
            for mark_id, mark_event in rows
        )

    def _load_for_event(self, execution_id: str, event_id: str) -> Plan[Any]:
        exe = yield from self.load(execution_id)
        if exe is None:
            return (None, False)
        seen = yield from self.is_processed(execution_id, event_id)
        return (exe, seen)


class GlobTimerDelete(MemoryPlan):
    """``delete_timer`` matches the path as a glob pattern."""

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> Plan[None]:
        execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
        due: list[DueTimer] = yield ScanDueTimers(float("inf"), None)
        for timer_id, timer_path, at in due:
            if timer_id == execution_id and at == fire_at and fnmatch.fnmatchcase(timer_path, path):
                yield DropTimer(timer_id, timer_path, at)


class NoUpdatedAt(MemoryPlan):
    """Lists summaries without ``updated_at``."""

    def _page(self, query: ListingQuery) -> Plan[ExecutionPage]:
        page = yield from super()._page(query)
        items = [item.model_copy(update={"updated_at": None}) for item in page.items]
        return ExecutionPage(items=items, next_cursor=page.next_cursor)


class TornSync(DictStore):
    """Writes the step without its trace, then encodes the trace and fails half-way."""

    def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        super().commit(exe, emits, processed_event_id, timers, spawns)
        if trace is not None:  # the bug: the step is encoded (and refused) after the write
            self.append_trace(exe.id, trace)


class TornAsync(AsyncDictStore):
    """The async twin of :class:`TornSync`."""

    async def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        await super().commit(exe, emits, processed_event_id, timers, spawns)
        if trace is not None:
            await self.append_trace(exe.id, trace)


@dataclass(frozen=True)
class Bug:
    """How to break the memory store: its plan, its classes, or its harness's claims."""

    plan: type[MemoryPlan] = MemoryPlan
    sync: type[DictStore] = DictStore
    aio: type[AsyncDictStore] = AsyncDictStore
    capabilities: Capabilities = CAPABILITIES
    url: str | None = None


CLAIMS_EVERYTHING = Capabilities(
    persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
)

BROKEN: dict[str, Bug] = {
    "skipped_cas": Bug(SkippedCas),
    "leaky_loser": Bug(LeakyLoser),
    "no_receipts": Bug(NoReceipts),
    "unguarded_delete_timer": Bug(UnguardedDeleteTimer),
    "off_by_one_ring": Bug(OffByOneRing),
    "skipping_cursor": Bug(SkippingCursor),
    "offset_cursor": Bug(OffsetCursor),
    "like_definition_filter": Bug(LikeDefinitionFilter),
    "torn_commit": Bug(sync=TornSync, aio=TornAsync),
    "unsorted_timers": Bug(),  # set below: the tables' sweep ignores the timer index
    "purge_leaves_timers": Bug(PurgeLeavesTimers),
    "prefix_purge": Bug(PrefixPurge),
    "prune_at_the_boundary": Bug(PruneAtTheBoundary),
    "prune_one_batch": Bug(PruneOneBatch),
    "glob_marks": Bug(GlobMarks),
    "glob_timer_delete": Bug(GlobTimerDelete),
    "no_updated_at": Bug(NoUpdatedAt),
    "kept_trace_counter": Bug(),  # set below: purge leaves the trace counter
    "claims_persistence": Bug(capabilities=CLAIMS_EVERYTHING, url=None),
    "claims_persistence_falsely": Bug(capabilities=CLAIMS_EVERYTHING, url="memory://kit-claims"),
}
BROKEN.update({name: Bug(plan) for name, plan in CLAIM_PLANS.items()})


class UnsortedTables(MemoryData):
    """Tables whose due-timer sweep returns insertion order (and applies ``limit`` first)."""

    def _apply(self, request: Any) -> Any:
        if isinstance(request, ScanDueTimers):
            due = [(e, p, f) for (e, p), f in self.timers.items() if f <= request.now]
            return due[: request.limit]
        return super()._apply(request)


class KeptTraceCounter(MemoryData):
    """Tables whose purge leaves the trace counter, so a re-created execution's trace
    continues the purged one's indices."""

    def _apply(self, request: Any) -> Any:
        if isinstance(request, DeleteOwned) and request.table == "trace":
            self.trace.pop(request.execution_id, None)
            return None
        return super()._apply(request)


TABLES: dict[str, type[MemoryData]] = {
    "unsorted_timers": UnsortedTables,
    "kept_trace_counter": KeptTraceCounter,
}


class BrokenHarness(StoreHarness):
    """Memory stores with the named bug (every store it opens shares one dataset)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, bug: str) -> None:
        self.bug = BROKEN[bug]
        self.data = TABLES.get(bug, MemoryData)()

    @classmethod
    def named(cls, name: str) -> StoreHarness:
        """A broken harness by bug name, or ``correct``/``undeclared``/``unordered``."""
        special: dict[str, type[StoreHarness]] = {
            "correct": CorrectHarness,
            "undeclared": UndeclaredHarness,
            "unordered": UnorderedHarness,
        }
        if name in special:
            return special[name]()
        caps = BROKEN[name].capabilities
        if caps == CAPABILITIES:
            return cls(name)
        claiming = type(f"Claiming{cls.__name__}", (cls,), {"capabilities": caps})
        harness: StoreHarness = claiming(name)
        return harness

    def open_sync(self) -> DictStore:
        store = self.bug.sync(self.data)
        store._plan = self.bug.plan()
        return store

    async def open_async(self) -> AsyncDictStore:
        store = self.bug.aio(self.data)
        store._plan = self.bug.plan()
        return store

    def url(self) -> str | None:
        return self.bug.url

    def footprint(self, execution_id: str) -> list[str]:
        return footprint(self.data, execution_id)


class UndeclaredHarness(StoreHarness):
    """A correct store whose harness forgets to declare its capabilities."""

    def __init__(self) -> None:
        self.data = MemoryData()

    def open_sync(self) -> DictStore:
        return DictStore(self.data)

    async def open_async(self) -> AsyncDictStore:
        return AsyncDictStore(self.data)

    def footprint(self, execution_id: str) -> list[str]:
        return footprint(self.data, execution_id)


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


# -- hardening (issue 7): cancellation, poison payloads, raw errors ---------------------------
# Appended by the hardening work; each bug below is caught by test_kit_strength_hardening.py.
# The async ones suspend and lock through anyio, so they carry their bug under asyncio and trio.


class LandsButRestores(AsyncDictStore):
    """Async commit that suspends after its write: cancelled there, the step is stored but
    ``exe.version`` is restored, so a retry writes the step twice."""

    async def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            await self._run(self._plan.commit(prepared, self.trace_max))
            await anyio.lowlevel.checkpoint()  # the bug: a cancellation point after the write


class LeaksLockOnCancel(AsyncDictStore):
    """Async commit that takes a dataset-wide lock and does not release it when cancelled."""

    async def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        lock: anyio.Lock | None = getattr(self.data, "kit_lock", None)
        if lock is None:
            lock = anyio.Lock()
            self.data.kit_lock = lock  # type: ignore[attr-defined]
        await lock.acquire()
        try:
            await anyio.lowlevel.checkpoint()
            await super().commit(exe, emits, processed_event_id, timers, spawns, trace)
        except anyio.get_cancelled_exc_class():
            raise  # the bug: a cancelled commit keeps the lock
        except BaseException:
            lock.release()
            raise
        lock.release()


def _lenient_commit(exe: Any, args: tuple[Any, ...]) -> PreparedCommit:
    """A commit prepared without the payload rules for the execution's context."""
    if not isinstance(exe, Execution):
        raise TypeError("commit() needs an Execution")
    clean = exe.model_copy(update={"context": {}})
    with committing(clean, *args) as prepared:
        pass
    document = pydantic_core.to_json(
        clean.model_copy(update={"context": exe.context}),
        inf_nan_mode="constants",
        fallback=repr,
    ).decode()
    return prepared._replace(document=document)


class LenientSync(DictStore):
    """Stores a context the codec's rules refuse (tuples, sets, int keys, 200 levels deep...)
    with a forgiving encoder: it cannot read them back (equal, or at all)."""

    def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        prepared = _lenient_commit(exe, (emits, processed_event_id, timers, spawns, trace))
        old, exe.version = exe.version, prepared.new_version
        try:
            self._run(self._plan.commit(prepared, self.trace_max))
        except BaseException:
            exe.version = old
            raise


class LenientAsync(AsyncDictStore):
    """The async twin of :class:`LenientSync`."""

    async def commit(
        self,
        exe: Any,
        emits: Any,
        processed_event_id: Any = None,
        timers: Any = (),
        spawns: Any = (),
        trace: Any = None,
    ) -> None:
        prepared = _lenient_commit(exe, (emits, processed_event_id, timers, spawns, trace))
        old, exe.version = exe.version, prepared.new_version
        try:
            await self._run(self._plan.commit(prepared, self.trace_max))
        except BaseException:
            exe.version = old
            raise


def _bind(*values: Any) -> None:
    """What a driver does with parameters before the store validated them: raw errors."""
    for value in values:
        if isinstance(value, str) or not isinstance(value, (int, float)):
            value.encode("utf-8")  # UnicodeEncodeError, AttributeError
        elif isinstance(value, float):
            math.floor(value)  # OverflowError (inf), ValueError (NaN)
        else:
            struct.pack("<q", value)  # struct.error


class RawErrorsSync(DictStore):
    """Binds arguments like a driver before validating them, so raw errors escape."""

    def load(self, execution_id: Any) -> Any:
        _bind(execution_id)
        return super().load(execution_id)

    def ack_outbox(self, seq: Any) -> None:
        _bind(seq)
        super().ack_outbox(seq)

    def due_timers(self, now: Any, *, limit: Any = None) -> Any:
        _bind(now)
        return super().due_timers(now, limit=limit)


class RawErrorsAsync(AsyncDictStore):
    """The async twin of :class:`RawErrorsSync`."""

    async def load(self, execution_id: Any) -> Any:
        _bind(execution_id)
        return await super().load(execution_id)

    async def ack_outbox(self, seq: Any) -> None:
        _bind(seq)
        await super().ack_outbox(seq)

    async def due_timers(self, now: Any, *, limit: Any = None) -> Any:
        _bind(now)
        return await super().due_timers(now, limit=limit)


BROKEN.update(
    {
        "lands_but_restores": Bug(aio=LandsButRestores),
        "leaks_lock_on_cancel": Bug(aio=LeaksLockOnCancel),
        "lenient_payload": Bug(sync=LenientSync, aio=LenientAsync),
        "raw_driver_errors": Bug(sync=RawErrorsSync, aio=RawErrorsAsync),
    }
)
HARDENING_BUGS = (
    "lands_but_restores",
    "leaks_lock_on_cancel",
    "lenient_payload",
    "raw_driver_errors",
)
"""The bugs of issue 7 (cancellation, poison payloads, raw errors)."""


# -- records (issue 11): export/import and unknown fields --------------------------------------
# Each bug below is caught by test_kit_strength_records.py.


class ImportRenumbersTrace(MemoryPlan):
    """``import_execution`` numbers the imported trace steps from 0 (their indices are lost)."""

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        trace = tuple((index, body) for index, (_, body) in enumerate(prepared.trace))
        yield from super().import_execution(dataclasses.replace(prepared, trace=trace))


class ImportReversesRelays(MemoryPlan):
    """``import_execution`` appends the record's outbox entries in reverse order."""

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        emits = tuple(reversed(prepared.emits))
        yield from super().import_execution(dataclasses.replace(prepared, emits=emits))


class ImportRelaysFirst(MemoryPlan):
    """``import_execution`` appends the relays before it checks that the execution is new, so a
    refused import leaves them behind."""

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        for emit in prepared.emits:  # the bug: a side write before the existence check
            yield AddRelay(OutboxRow(emit.target_id, emit.event_json))
        yield from super().import_execution(dataclasses.replace(prepared, emits=()))


class ImportOverwrites(MemoryPlan):
    """``import_execution`` replaces a stored execution (an upsert) instead of refusing."""

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        if prepared.execution is not None:
            yield from self.purge(prepared.execution_id, True)
        yield from super().import_execution(prepared)


class ExportWithoutTimes(MemoryPlan):
    """``export_execution`` leaves out the clock: no ``updated_at``, every mark at 0.0."""

    def export_execution(self, execution_id: str) -> Plan[ExecutionRecord | None]:
        record = yield from super().export_execution(execution_id)
        if record is None:
            return None
        marks = tuple((event_id, 0.0) for event_id, _ in record.processed)
        return dataclasses.replace(record, updated_at=None, processed=marks)


def _declared_only(document: str) -> str:
    """``document`` (an execution) re-encoded with only the fields the models declare."""
    data = json.loads(document)
    data = {k: v for k, v in data.items() if k in Execution.model_fields}
    data["deferred"] = [_declared(Event, item) for item in data.get("deferred", [])]
    children = data.get("children", {})
    data["children"] = {key: _declared(ChildState, item) for key, item in children.items()}
    return json.dumps(data)


def _declared(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key in model.model_fields}


def _declared_emits(emits: tuple[PreparedEmit, ...]) -> tuple[PreparedEmit, ...]:
    return tuple(
        dataclasses.replace(
            emit, event_json=json.dumps(_declared(Event, json.loads(emit.event_json)))
        )
        for emit in emits
    )


class DropsUnknownFields(MemoryPlan):
    """An older release's encoder: writes only the declared fields of executions and events."""

    def commit(self, prepared: PreparedCommit, trace_max: int | None) -> Plan[None]:
        stripped = prepared._replace(
            document=_declared_only(prepared.document),
            emits=_declared_emits(prepared.emits),
        )
        yield from super().commit(stripped, trace_max)

    def import_execution(self, prepared: PreparedImport) -> Plan[None]:
        execution = prepared.execution
        if execution is not None:
            execution = dataclasses.replace(execution, document=_declared_only(execution.document))
        stripped = dataclasses.replace(
            prepared, execution=execution, emits=_declared_emits(prepared.emits)
        )
        yield from super().import_execution(stripped)


BROKEN.update(
    {
        "import_renumbers_trace": Bug(ImportRenumbersTrace),
        "import_reverses_relays": Bug(ImportReversesRelays),
        "import_relays_first": Bug(ImportRelaysFirst),
        "import_overwrites": Bug(ImportOverwrites),
        "export_without_times": Bug(ExportWithoutTimes),
        "drops_unknown_fields": Bug(DropsUnknownFields),
    }
)
RECORD_BUGS = (
    "import_renumbers_trace",
    "import_reverses_relays",
    "import_relays_first",
    "import_overwrites",
    "export_without_times",
    "drops_unknown_fields",
)
"""The bugs of issue 11 (records, unknown fields)."""


def harness_fixture(name: str) -> Any:
    """A ``harel_harness`` fixture over ``BrokenHarness.named(name)``, for a nested session's
    conftest (``harel_harness = harness_fixture("import_overwrites")``)."""

    @pytest.fixture
    def harel_harness() -> Iterator[StoreHarness]:
        harness = BrokenHarness.named(name)
        yield harness
        harness.destroy()

    return harel_harness
