"""The store's operations as sans-IO plans: generators that yield file requests.

Every contract operation is one generator here.  It validates its arguments first (a wrong
type raises ``TypeError``/``ValueError`` before anything is read), then yields requests — a
:class:`Read` of one file, a :class:`Write` of several files at once, a :class:`Pause` between
two batches — receives each request's result, and returns the operation's value or raises its
typed error.  Nothing here touches the disk: ``sync.py`` runs a plan under the directory lock
with :func:`harel.store.common.drive`, handing each request to the file layer (``_files``).

The rules of the store live here once: the CAS, what a commit, a purge or a prune writes, the
trace ring, the decoding of stored records (a record that does not decode raises
:class:`~harel.store.errors.StoreCorrupted` naming it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from harel.model import Execution, ExecutionPage, Status
from harel.store.common import (
    cas_decision,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    committing,
    conflict,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    encode_trace_step,
    listing_query,
    page_from_probe,
    sweep_limit,
    trace_keep_from,
)
from harel.store.common.validate import show
from harel.store.contract import FINISHED, DueTimer, Emit, OutboxEntry, Spawn, SpawnEntry, TimerOp
from harel.store.errors import ExecutionActive, ExecutionNotFound, StoreCorrupted

from harel_example_jsondir import _schema
from harel_example_jsondir._state import StoreState, TraceRing

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Read:
    """Read one file; the result is its text, ``None`` when it does not exist."""

    path: str


@dataclass(frozen=True, slots=True)
class Write:
    """Replace (a text) or delete (``None``) these files, all of them or none; result ``None``."""

    files: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """Release the directory lock and take it again (lets others in between two batches)."""


Request = Read | Write | Pause
Plan = Generator[Request, Any, T]
"""A plan yields requests, is sent their results, and returns ``T``."""

_FINISHED = frozenset(status.value for status in FINISHED)


# -- reading and decoding --------------------------------------------------------------------


def read_state() -> Plan[StoreState]:
    """Read and parse ``state.json``."""
    return StoreState.parse((yield Read(_schema.STATE)))


def read_ring(execution_id: str) -> Plan[TraceRing]:
    """Read and parse the trace ring of ``execution_id``."""
    return TraceRing.parse((yield Read(_schema.trace_path(execution_id))), execution_id)


def decode_document(text: str, execution_id: str) -> Execution:
    """The stored execution; ``StoreCorrupted`` unless the document is that execution's."""
    what = f"the document of execution {show(execution_id)}"
    exe = decode_execution(text, what=what)
    if exe.id != execution_id:
        raise StoreCorrupted(f"{what} holds execution {show(exe.id)}; remove that file")
    return exe


def open_directory() -> Plan[None]:
    """Check that the directory holds this release's layout (an empty one does)."""
    yield from read_state()


# -- the contract's operations ----------------------------------------------------------------


def load(execution_id: str) -> Plan[Execution | None]:
    """A fresh copy of the stored execution, or ``None``."""
    check_id(execution_id)
    text = yield Read(_schema.document_path(execution_id))
    return None if text is None else decode_document(text, execution_id)


def load_for_event(execution_id: str, event_id: str) -> Plan[tuple[Execution | None, bool]]:
    """``load`` plus whether ``event_id`` was already processed by that execution."""
    check_event_ref(execution_id, event_id)
    text = yield Read(_schema.document_path(execution_id))
    if text is None:
        return None, False
    state = yield from read_state()
    return decode_document(text, execution_id), state.is_processed(execution_id, event_id)


def commit(
    exe: Execution,
    emits: Sequence[Emit],
    processed_event_id: str | None,
    timers: Sequence[TimerOp],
    spawns: Sequence[Spawn],
    trace: dict[str, Any] | None,
    trace_max: int | None,
) -> Plan[None]:
    """CAS the document and write the step's effects, in one :class:`Write`.

    ``exe.version`` is bumped while the plan runs and restored when it raises or is closed
    early, so it says whether the write happened.
    """
    with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
        trace_keep_from(0, trace_max)  # a bad trace_max fails before any IO
        execution_id = prepared.execution_id
        state = yield from read_state()
        found = state.version_of(execution_id)
        if cas_decision(prepared.expected_version, found) == "conflict":
            raise conflict(prepared, found)
        state.apply(prepared)
        files: list[tuple[str, str | None]] = [
            (_schema.document_path(execution_id), prepared.document),
            (_schema.STATE, state.dump()),
        ]
        if prepared.trace is not None:
            ring = yield from read_ring(execution_id)
            ring.append(prepared.trace, trace_max)
            files.append((_schema.trace_path(execution_id), ring.dump()))
        yield Write(tuple(files))


def is_processed(execution_id: str, event_id: str) -> Plan[bool]:
    """Whether that execution already processed that event."""
    check_event_ref(execution_id, event_id)
    state = yield from read_state()
    return state.is_processed(execution_id, event_id)


def _update_state(change: Callable[[StoreState], bool]) -> Plan[None]:
    """Apply ``change`` to the state and write it back when it reports a change."""
    state = yield from read_state()
    if change(state):
        yield Write(((_schema.STATE, state.dump()),))


def pending_outbox(limit: int | None) -> Plan[list[OutboxEntry]]:
    """Undelivered events, oldest first."""
    sweep_limit(limit)
    state = yield from read_state()
    rows = sorted(state.outbox.items())[:limit]
    return [
        OutboxEntry(seq, target, decode_event(event, what=f"outbox entry {seq}"))
        for seq, (target, event) in rows
    ]


def ack_outbox(seq: int) -> Plan[None]:
    """Forget a delivered event (unknown seq: no-op)."""
    check_seq(seq)
    yield from _update_state(lambda state: state.outbox.pop(seq, None) is not None)


def pending_spawns(limit: int | None) -> Plan[list[SpawnEntry]]:
    """Uncreated children, oldest first."""
    sweep_limit(limit)
    state = yield from read_state()
    rows = sorted(state.spawns.items())[:limit]
    return [
        SpawnEntry(seq, parent, child, root, decode_payload(context, what=f"spawn intent {seq}"))
        for seq, (parent, child, root, context) in rows
    ]


def ack_spawn(seq: int) -> Plan[None]:
    """Forget a created child's intent (unknown seq: no-op)."""
    check_seq(seq)
    yield from _update_state(lambda state: state.spawns.pop(seq, None) is not None)


def due_timers(now: float, limit: int | None) -> Plan[list[DueTimer]]:
    """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, id, path)``."""
    moment = check_now(now)
    sweep_limit(limit)
    state = yield from read_state()
    return state.due(moment)[:limit]


def delete_timer(execution_id: str, path: str, fire_at: float) -> Plan[None]:
    """Disarm a timer only if it still holds exactly ``fire_at``."""
    execution_id, path, expected = check_timer_ref(execution_id, path, fire_at)
    key = (execution_id, path)

    def disarm(state: StoreState) -> bool:
        if key in state.timers and state.timers[key] == expected:
            del state.timers[key]
            return True
        return False

    yield from _update_state(disarm)


def read_trace(execution_id: str) -> Plan[list[dict[str, Any]]]:
    """The retained trace steps, oldest first, each with its ``index``."""
    check_id(execution_id)
    ring = yield from read_ring(execution_id)
    what = f"a trace step of execution {show(execution_id)}"
    return [decode_trace_step(body, index, what=what) for index, body in ring.ordered()]


def append_trace(execution_id: str, entry: dict[str, Any], trace_max: int | None) -> Plan[None]:
    """Append a step outside a commit; an unknown execution raises ``ExecutionNotFound``."""
    check_id(execution_id)
    body = encode_trace_step(entry)
    trace_keep_from(0, trace_max)
    state = yield from read_state()
    if state.version_of(execution_id) is None:
        raise ExecutionNotFound(execution_id)
    ring = yield from read_ring(execution_id)
    ring.append(body, trace_max)
    yield Write(((_schema.trace_path(execution_id), ring.dump()),))


def list_executions(
    status: Iterable[Status] | None,
    definition_id: str | None,
    roots_only: bool,
    limit: int,
    cursor: str | None,
) -> Plan[ExecutionPage]:
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
    state = yield from read_state()
    rows = [
        summary
        for summary in state.summaries()
        if (query.after is None or summary.id > query.after) and query.matches(summary)
    ]
    return page_from_probe(query, rows[: query.limit + 1])


def purge(execution_id: str, force: bool) -> Plan[bool]:
    """Remove the execution and everything that belongs to it, in one :class:`Write`.

    Returns whether the execution was stored; refuses an unfinished one unless ``force``.
    """
    check_id(execution_id)
    check_flag(force, "force")
    state = yield from read_state()
    status = state.status_of(execution_id)
    if status is not None and status not in _FINISHED and not force:
        raise ExecutionActive(execution_id, status)
    if state.forget(execution_id):
        yield Write(
            (
                (_schema.STATE, state.dump()),
                (_schema.document_path(execution_id), None),
                (_schema.trace_path(execution_id), None),
            )
        )
    return status is not None


def prune_processed(older_than: float, batch_size: int) -> Plan[int]:
    """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per write.

    The lock is released between two batches (:class:`Pause`), so a long prune never keeps
    writers out for long; returns how many marks were dropped.
    """
    cutoff, size = check_prune(older_than, batch_size)
    dropped = 0
    while True:
        state = yield from read_state()
        batch = state.marks_before(cutoff, size)
        if not batch:
            return dropped
        state.drop_marks(batch)
        yield Write(((_schema.STATE, state.dump()),))
        dropped += len(batch)
        if len(batch) < size:
            return dropped
        yield Pause()
