"""Deliberately broken memory stores: each has one classic backend bug the kit must catch.

Most bugs live in a subclass of the memory backend's sync store (``DictStore``) overriding
one small step, and the async store wraps it (``AsyncDictStore.over``), so both are broken
the same way; a few need the async class itself or a harness that claims what the store
cannot do.  ``BrokenHarness.named(name)`` builds one.
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
from broken_claims import CLAIM_STORES
from harel.conformance.harness import StoreHarness
from harel.model import ChildState, Event, Execution, ExecutionPage, ExecutionSummary
from harel.store.common.commit import (
    PreparedCommit,
    PreparedEmit,
    already_processed,
    base_holds,
    cas_decision,
    committing,
    conflict,
)
from harel.store.common.listing import ListingQuery, encode_cursor, listing_query, page_from_probe
from harel.store.common.records import PreparedImport
from harel.store.common.validate import check_prune, check_timer_ref
from harel.store.contract import DEFAULT_PRUNE_BATCH, Capabilities, DueTimer, ExecutionRecord
from harel.store.errors import AlreadyProcessed
from harel.store.memory import CAPABILITIES, AsyncDictStore, DictStore, MemoryData
from harel.store.memory._tables import StoredExecution
from harel.store.memory.testing import footprint
from pydantic import BaseModel

EVERYTHING = 10**9


def _refuse_marked(store: DictStore, prepared: PreparedCommit, row: StoredExecution | None) -> None:
    """Refuse (``AlreadyProcessed``) a commit whose dedupe mark is already stored: the part of
    the commit rule the CAS bugs below keep."""
    event_id = prepared.processed_event_id
    if row is not None and event_id is not None and store._marked(prepared.execution_id, event_id):
        raise already_processed(prepared, row.version)


class SkippedCas(DictStore):
    """Writes whatever it is given: no compare-and-set at all (no fence, no dedupe check)."""

    def _cas(self, prepared: PreparedCommit, row: StoredExecution | None) -> bool:
        return True


class LeakyLoser(DictStore):
    """Detects the conflict but writes the loser's outbox entries before raising."""

    def _cas(self, prepared: PreparedCommit, row: StoredExecution | None) -> bool:
        found = None if row is None else row.version
        try:
            _refuse_marked(self, prepared, row)
        except AlreadyProcessed:
            refused = True
        else:
            refused = cas_decision(prepared.expected_version, found) == "conflict" or (
                row is not None and not base_holds(prepared, row.receipt(row.version))
            )
        if refused:
            for emit in prepared.emits:  # the bug: side writes before the verdict is raised
                self._add_emit(emit)
            _refuse_marked(self, prepared, row)  # AlreadyProcessed when that is the verdict
            raise conflict(prepared, found)
        return True


class NoReceipts(DictStore):
    """Writes receipts but never reads them: a re-sent stored commit is a ``StoreConflict``."""

    def _cas(self, prepared: PreparedCommit, row: StoredExecution | None) -> bool:
        _refuse_marked(self, prepared, row)
        found = None if row is None else row.version
        if cas_decision(prepared.expected_version, found) == "conflict" or (
            row is not None and not base_holds(prepared, row.receipt(row.version))
        ):
            raise conflict(prepared, found)
        return True


class UnguardedDeleteTimer(DictStore):
    """``delete_timer`` removes the timer whatever ``fire_at`` it holds now."""

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        execution_id, path, _ = check_timer_ref(execution_id, path, fire_at)
        with self.data.lock:
            self._drop_timer(execution_id, path, None)


class OffByOneRing(DictStore):
    """Keeps ``trace_max + 1`` steps."""

    def _append_step(self, execution_id: str, body: str, trace_max: int | None) -> None:
        super()._append_step(execution_id, body, trace_max + 1 if trace_max else None)


def _everything(store: DictStore, query: ListingQuery | None = None) -> list[ExecutionSummary]:
    """Every execution ``query`` matches (every execution without one), from the start."""
    if query is None:
        query = listing_query(
            status=None, definition_id=None, roots_only=False, limit=1, cursor=None
        )
    return store._scan(dataclasses.replace(query, after=None, limit=EVERYTHING))


class SkippingCursor(DictStore):
    """Its cursor resumes one row too late, so every page boundary loses a row."""

    def _page(self, query: ListingQuery) -> ExecutionPage:
        page = super()._page(query)
        if page.next_cursor is None:
            return page
        ids = [row.id for row in _everything(self, query)]
        after = ids.index(page.items[-1].id) + 1
        if after >= len(ids) - 1:
            return ExecutionPage(items=page.items, next_cursor=None)
        return ExecutionPage(items=page.items, next_cursor=encode_cursor(ids[after]))


class OffsetCursor(DictStore):
    """Pages by position (``OFFSET``): rows created or purged between pages shift the rest."""

    def _page(self, query: ListingQuery) -> ExecutionPage:
        offset = int(query.after[1:]) if query.after else 0
        rows = _everything(self, query)
        end = offset + query.limit
        more = len(rows) > end
        return ExecutionPage(
            items=rows[offset:end], next_cursor=encode_cursor(f"#{end}") if more else None
        )


def _like(pattern: str, value: str) -> bool:
    """SQL ``LIKE`` (``%`` any run, ``_`` one character, ASCII case-insensitive)."""
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) is not None


class LikeDefinitionFilter(DictStore):
    """Filters ``definition_id`` with ``LIKE`` instead of equality."""

    def _page(self, query: ListingQuery) -> ExecutionPage:
        pattern = query.definition_id
        rows = self._scan(dataclasses.replace(query, definition_id=None, limit=EVERYTHING))
        if pattern is not None:
            rows = [row for row in rows if _like(pattern, row.definition_id)]
        return page_from_probe(query, rows[: query.limit + 1])


class PurgeLeavesTimers(DictStore):
    """``purge`` forgets the timers table."""

    def _purge_rows(self, execution_id: str) -> None:
        timers = dict(self.data.timers.get(execution_id, {}))
        super()._purge_rows(execution_id)
        for path, fire_at in timers.items():  # the bug: the timers stay
            self._put_timer(execution_id, path, fire_at)


class KeptTraceCounter(DictStore):
    """``purge`` leaves the trace counter, so a re-created execution's trace continues the
    purged one's indices."""

    def _purge_rows(self, execution_id: str) -> None:
        counter = self.data.last_trace_index.get(execution_id)
        super()._purge_rows(execution_id)
        if counter is not None:  # the bug: the counter stays
            self.data.last_trace_index[execution_id] = counter


class PrefixPurge(DictStore):
    """``purge`` deletes every execution whose id starts with the given one (``LIKE 'id%'``)."""

    def _purge_rows(self, execution_id: str) -> None:
        super()._purge_rows(execution_id)
        for row in _everything(self):
            if row.id.startswith(execution_id):
                super()._purge_rows(row.id)


class PruneAtTheBoundary(DictStore):
    """``prune_processed`` also drops marks recorded exactly at ``older_than`` (``<=``)."""

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        after = math.nextafter(older_than, math.inf)
        return super().prune_processed(after, batch_size=batch_size)


class PruneOneBatch(DictStore):
    """``prune_processed`` stops after its first batch."""

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        older_than, batch_size = check_prune(older_than, batch_size)
        with self.data.lock:
            return self._prune_batch(older_than, batch_size)[1]


class GlobMarks(DictStore):
    """``is_processed`` / ``load_for_event`` match the event id as a glob pattern."""

    def _marked(self, execution_id: str, event_id: str) -> bool:
        marks = self.data.processed.get(execution_id, {})
        return any(fnmatch.fnmatchcase(mark, event_id) for mark in marks)


class GlobTimerDelete(DictStore):
    """``delete_timer`` matches the path as a glob pattern."""

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
        with self.data.lock:
            due: list[DueTimer] = self._due(math.inf, None)
            for timer_id, timer_path, at in due:
                matches = fnmatch.fnmatchcase(timer_path, path)
                if timer_id == execution_id and at == fire_at and matches:
                    self._drop_timer(timer_id, timer_path, at)


class NoUpdatedAt(DictStore):
    """Lists summaries without ``updated_at``."""

    def _page(self, query: ListingQuery) -> ExecutionPage:
        page = super()._page(query)
        items = [item.model_copy(update={"updated_at": None}) for item in page.items]
        return ExecutionPage(items=items, next_cursor=page.next_cursor)


class UnsortedTimers(DictStore):
    """Its due-timer sweep returns insertion order (and applies ``limit`` first)."""

    def _due(self, now: float, limit: int | None) -> list[DueTimer]:
        timers = self.data.timers.items()
        due = [(e, p, at) for e, paths in timers for p, at in paths.items() if at <= now]
        return due[:limit]


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
    """How to break the memory store: its sync class (the async store wraps it unless ``aio``
    is given), or its harness's claims."""

    sync: type[DictStore] = DictStore
    aio: type[AsyncDictStore] | None = None
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
    "torn_commit": Bug(TornSync, TornAsync),
    "unsorted_timers": Bug(UnsortedTimers),
    "purge_leaves_timers": Bug(PurgeLeavesTimers),
    "prefix_purge": Bug(PrefixPurge),
    "prune_at_the_boundary": Bug(PruneAtTheBoundary),
    "prune_one_batch": Bug(PruneOneBatch),
    "glob_marks": Bug(GlobMarks),
    "glob_timer_delete": Bug(GlobTimerDelete),
    "no_updated_at": Bug(NoUpdatedAt),
    "kept_trace_counter": Bug(KeptTraceCounter),
    "claims_persistence": Bug(capabilities=CLAIMS_EVERYTHING, url=None),
    "claims_persistence_falsely": Bug(capabilities=CLAIMS_EVERYTHING, url="memory://kit-claims"),
}
BROKEN.update({name: Bug(store) for name, store in CLAIM_STORES.items()})


class BrokenHarness(StoreHarness):
    """Memory stores with the named bug (every store it opens shares one dataset)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, bug: str) -> None:
        self.bug = BROKEN[bug]
        self.data = MemoryData()

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
        return self.bug.sync(self.data)

    async def open_async(self) -> AsyncDictStore:
        if self.bug.aio is not None:
            return self.bug.aio(self.data)
        return AsyncDictStore.over(self.bug.sync(self.data))

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
            self.store._commit(prepared)
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
            self._commit(prepared)
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
            self.store._commit(prepared)
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
        "lenient_payload": Bug(LenientSync, LenientAsync),
        "raw_driver_errors": Bug(RawErrorsSync, RawErrorsAsync),
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


class ImportRenumbersTrace(DictStore):
    """``import_execution`` numbers the imported trace steps from 0 (their indices are lost)."""

    def _import(self, prepared: PreparedImport) -> None:
        trace = tuple((index, body) for index, (_, body) in enumerate(prepared.trace))
        super()._import(dataclasses.replace(prepared, trace=trace))


class ImportReversesRelays(DictStore):
    """``import_execution`` appends the record's outbox entries in reverse order."""

    def _import(self, prepared: PreparedImport) -> None:
        emits = tuple(reversed(prepared.emits))
        super()._import(dataclasses.replace(prepared, emits=emits))


class ImportRelaysFirst(DictStore):
    """``import_execution`` appends the relays before it checks that the execution is new, so a
    refused import leaves them behind."""

    def _import(self, prepared: PreparedImport) -> None:
        for emit in prepared.emits:  # the bug: a side write before the existence check
            self._add_emit(emit)
        super()._import(dataclasses.replace(prepared, emits=()))


class ImportOverwrites(DictStore):
    """``import_execution`` replaces a stored execution (an upsert) instead of refusing."""

    def _import(self, prepared: PreparedImport) -> None:
        if prepared.execution is not None:
            self._purge_rows(prepared.execution_id)
        super()._import(prepared)


class ExportWithoutTimes(DictStore):
    """``export_execution`` leaves out the clock: no ``updated_at``, every mark at 0.0."""

    def export_execution(self, execution_id: str) -> ExecutionRecord | None:
        record = super().export_execution(execution_id)
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


class DropsUnknownFields(DictStore):
    """An older release's encoder: writes only the declared fields of executions and events."""

    def _commit(self, prepared: PreparedCommit) -> None:
        stripped = prepared._replace(
            document=_declared_only(prepared.document),
            emits=_declared_emits(prepared.emits),
        )
        super()._commit(stripped)

    def _import(self, prepared: PreparedImport) -> None:
        execution = prepared.execution
        if execution is not None:
            execution = dataclasses.replace(execution, document=_declared_only(execution.document))
        stripped = dataclasses.replace(
            prepared, execution=execution, emits=_declared_emits(prepared.emits)
        )
        super()._import(stripped)


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
