"""Execution records: validating an import once for every backend, and hashing a record.

A backend's ``import_execution`` is::

    prepared = prepare_import(record, trace_max=self.trace_max, max_document_bytes=LIMIT)
    ...write prepared atomically, conditional on the execution not being stored...

:func:`prepare_import` refuses, before anything is written, every record a store could not
read back equal or that breaks the contract's invariants (relays targeted elsewhere, a trace
with gaps, timers without an execution); it encodes every document once and applies the trace
ring.  :func:`record_digest` is the content hash ``harel migrate`` compares: store-assigned
``seq`` values are left out, dict key order does not matter, floats count bit-exactly.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harel.model import Execution, Status
from harel.store.common.codec import check_max_bytes, dumps, encode_event, encode_execution
from harel.store.common.commit import PreparedEmit, PreparedSpawn
from harel.store.common.limits import MAX_DOCUMENT_BYTES, MAX_INT
from harel.store.common.trace import INDEX_KEY, encode_trace_step, trace_keep_from
from harel.store.common.validate import check_id, check_path
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry
from harel.store.errors import InvalidArgument, InvalidPayload


@dataclass(frozen=True, slots=True)
class PreparedExecution:
    """The execution row of an import: its summary columns and encoded document."""

    version: int
    definition_id: str
    status: str
    outcome: str | None
    active_path: str | None
    parent_id: str | None
    document: str
    updated_at: float


@dataclass(frozen=True, slots=True)
class PreparedImport:
    """Everything one ``import_execution`` writes, validated and encoded, for any backend.

    ``timers`` and ``processed`` are sorted; ``emits`` and ``spawns`` keep the source's order
    (the destination assigns new ``seq`` values in that order); ``trace`` is ``(index,
    encoded step)`` pairs, contiguous, already cut to the destination's ``trace_max``.
    """

    execution_id: str
    execution: PreparedExecution | None
    processed: tuple[tuple[str, float], ...]
    timers: tuple[tuple[str, float], ...]
    emits: tuple[PreparedEmit, ...]
    spawns: tuple[PreparedSpawn, ...]
    trace: tuple[tuple[int, str], ...]
    priority: int = 0
    """The execution's priority (0 without one): the priority of the work rows it writes."""
    prepared_at: float = 0.0
    """Epoch seconds the import was prepared at: when its relay units became due."""

    @property
    def row_count(self) -> int:
        """How many rows/items the import writes (the execution counts as one)."""
        return (
            (self.execution is not None)
            + len(self.processed)
            + len(self.timers)
            + len(self.emits)
            + len(self.spawns)
            + len(self.trace)
        )


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidPayload(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InvalidPayload(f"{what} must be finite, got {value!r}")
    return 0.0 if number == 0.0 else number


def _prepare_execution(
    record: ExecutionRecord, exe: Execution, limit: int, now: float
) -> PreparedExecution:
    if not isinstance(exe, Execution):
        raise TypeError(f"record.execution must be an Execution, got {type(exe).__name__}")
    if exe.id != record.execution_id:
        raise InvalidArgument(
            f"record {record.execution_id!r} holds an execution with id {exe.id!r}; "
            "a record's execution must carry the record's id"
        )
    version = exe.version
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < MAX_INT:
        raise InvalidArgument(
            f"execution {exe.id!r} has version {version!r}; an exported execution has a "
            f"version in [1, {MAX_INT - 1}]"
        )
    updated = now if record.updated_at is None else _finite(record.updated_at, "updated_at")
    return PreparedExecution(
        version=version,
        definition_id=exe.definition_id,
        status=Status(exe.status).value,
        outcome=exe.outcome,
        active_path=exe.active_path,
        parent_id=exe.parent_id,
        document=encode_execution(exe, max_bytes=limit),
        updated_at=updated,
    )


def _keyed_times(
    pairs: tuple[tuple[str, float], ...],
    field: str,
    key: str,
    noun: str,
    check: Callable[[object, str], str],
    when: str,
    twice: str,
) -> tuple[tuple[str, float], ...]:
    """``(name, seconds)`` pairs checked (usable name, finite time, no name twice) and sorted:
    a record's dedupe marks and its armed timers alike."""
    seen: dict[str, float] = {}
    for index, item in enumerate(pairs):
        name, at = item
        name = check(name, f"{field}[{index}] {key}")
        if name in seen:
            raise InvalidArgument(f"{field}[{index}]: {noun} {name!r} is {twice} twice")
        seen[name] = _finite(at, f"{field}[{index}] {when}")
    return tuple(sorted(seen.items()))


def _prepare_marks(record: ExecutionRecord) -> tuple[tuple[str, float], ...]:
    return _keyed_times(
        record.processed, "processed", "event id", "event", check_id, "recorded_at", "marked"
    )


def _prepare_timers(record: ExecutionRecord) -> tuple[tuple[str, float], ...]:
    return _keyed_times(record.timers, "timers", "path", "path", check_path, "fire_at", "armed")


def _prepare_emits(record: ExecutionRecord, limit: int) -> tuple[PreparedEmit, ...]:
    emits = []
    for index, entry in enumerate(sorted(record.outbox, key=lambda item: item.seq)):
        if not isinstance(entry, OutboxEntry):
            raise TypeError(f"outbox[{index}] must be an OutboxEntry, got {type(entry).__name__}")
        if entry.target_id != record.execution_id:
            raise InvalidArgument(
                f"outbox[{index}] targets {entry.target_id!r}; a record holds only the "
                f"entries targeted at {record.execution_id!r}"
            )
        what = f"outbox[{index}] event"
        emits.append(
            PreparedEmit(
                entry.target_id,
                entry.event.id,
                encode_event(entry.event, what=what, max_bytes=limit),
            )
        )
    return tuple(emits)


def _prepare_spawns(record: ExecutionRecord, limit: int) -> tuple[PreparedSpawn, ...]:
    spawns = []
    for index, entry in enumerate(sorted(record.spawns, key=lambda item: item.seq)):
        if not isinstance(entry, SpawnEntry):
            raise TypeError(f"spawns[{index}] must be a SpawnEntry, got {type(entry).__name__}")
        if entry.parent_id != record.execution_id:
            raise InvalidArgument(
                f"spawns[{index}] was written by {entry.parent_id!r}; a record holds only the "
                f"intents {record.execution_id!r} wrote"
            )
        child = check_id(entry.child_id, f"spawns[{index}] child id")
        root = check_path(entry.root_path, f"spawns[{index}] root path")
        if not isinstance(entry.context, dict):
            raise TypeError(f"spawns[{index}] context must be a dict")
        context = dumps(entry.context, what=f"spawns[{index}] context", max_bytes=limit)
        spawns.append(PreparedSpawn(child, root, context))
    return tuple(spawns)


def _prepare_trace(
    record: ExecutionRecord, trace_max: int | None, limit: int
) -> tuple[tuple[int, str], ...]:
    steps: list[tuple[int, str]] = []
    for position, step in enumerate(record.trace):
        if not isinstance(step, dict):
            raise TypeError(f"trace[{position}] must be a dict, got {type(step).__name__}")
        index = step.get(INDEX_KEY)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_INT:
            raise InvalidArgument(f"trace[{position}] has index {index!r}; want an int >= 0")
        if steps and index != steps[-1][0] + 1:
            raise InvalidArgument(
                f"trace[{position}] has index {index} after {steps[-1][0]}; a record's trace "
                "indices are contiguous and ascending"
            )
        steps.append((index, encode_trace_step(step, max_document_bytes=limit)))
    if steps:
        keep_from = trace_keep_from(steps[-1][0], trace_max)
        if keep_from is not None:
            steps = [step for step in steps if step[0] >= keep_from]
    return tuple(steps)


def prepare_import(
    record: ExecutionRecord,
    *,
    trace_max: int | None,
    max_document_bytes: int = MAX_DOCUMENT_BYTES,
    now: float = 0.0,
) -> PreparedImport:
    """Validate and encode ``record`` for an atomic import; nothing is written before this.

    Refuses (``TypeError``, ``InvalidArgument``, ``InvalidIdentifier``, ``InvalidPayload``,
    ``PayloadTooLarge``) a record with an unusable id, an execution of another id or of
    version < 1, relays not targeted at / written by the record's id, duplicate marks or
    timers, a non-contiguous trace, or marks, timers, spawns or trace without an execution.
    ``now`` dates the execution when the record carries no ``updated_at``.
    """
    if not isinstance(record, ExecutionRecord):
        raise TypeError(f"import_execution() needs an ExecutionRecord, got {type(record).__name__}")
    execution_id = check_id(record.execution_id, "record execution id")
    limit = check_max_bytes(max_document_bytes)
    trace_keep_from(0, trace_max)
    if record.execution is None and (
        record.processed or record.timers or record.spawns or record.trace
    ):
        raise InvalidArgument(
            f"record {execution_id!r} has marks, timers, spawns or trace but no execution; "
            "only outbox entries may target an id that is not stored"
        )
    execution = (
        None
        if record.execution is None
        else _prepare_execution(record, record.execution, limit, now)
    )
    return PreparedImport(
        execution_id=execution_id,
        execution=execution,
        processed=_prepare_marks(record),
        timers=_prepare_timers(record),
        emits=_prepare_emits(record, limit),
        spawns=_prepare_spawns(record, limit),
        trace=_prepare_trace(record, trace_max, limit),
        priority=0 if record.execution is None else record.execution.priority,
        prepared_at=now,
    )


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _canonical(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def record_content(record: ExecutionRecord) -> dict[str, Any]:
    """The part of a record that must survive a move, as plain data: no ``seq``, no
    ``updated_at``, marks and timers sorted, floats as their ``repr``."""
    exe = record.execution
    content: dict[str, Any] = _canonical(
        {
            "id": record.execution_id,
            "execution": None if exe is None else exe.model_dump(mode="json"),
            "processed": sorted([event_id, repr(float(at))] for event_id, at in record.processed),
            "timers": sorted([path, repr(float(fire_at))] for path, fire_at in record.timers),
            "outbox": [
                [entry.target_id, entry.event.model_dump(mode="json")]
                for entry in sorted(record.outbox, key=lambda item: item.seq)
            ],
            "spawns": [
                [entry.child_id, entry.root_path, entry.context]
                for entry in sorted(record.spawns, key=lambda item: item.seq)
            ],
            "trace": list(record.trace),
        }
    )
    return content


def record_digest(record: ExecutionRecord) -> str:
    """A SHA-256 over :func:`record_content`: equal for the same execution in any store."""
    text = dumps(record_content(record), what=f"record {record.execution_id!r}")
    return hashlib.sha256(text.encode()).hexdigest()


def trim_record_trace(record: ExecutionRecord, trace_max: int | None) -> ExecutionRecord:
    """``record`` with its trace cut as a store with ``trace_max`` would keep it on import."""
    keep_from = (
        None if not record.trace else trace_keep_from(int(record.trace[-1][INDEX_KEY]), trace_max)
    )
    if keep_from is None:
        return record
    return replace(record, trace=tuple(s for s in record.trace if s[INDEX_KEY] >= keep_from))
