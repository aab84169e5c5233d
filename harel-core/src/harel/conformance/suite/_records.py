"""The records concern's values and checks: a population built by commits, the reference
DictStore's export of it, a hand-made record to import, and the records every store refuses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from harel.conformance.suite._base import SyncAsAsync, event, new_exe, step
from harel.model import Execution, Status
from harel.store.common.records import record_digest
from harel.store.contract import (
    AsyncExecutionStore,
    ExecutionRecord,
    OutboxEntry,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import InvalidArgument, InvalidIdentifier, InvalidPayload

SUBJECT = "kit-rec"
"""The execution the population is built around."""
CHILD = "kit-rec-child"
"""An id ``SUBJECT`` emits to and spawns, never stored: its record holds only relays."""
PEER = "kit-rec-peer"
"""Another execution that emits to ``SUBJECT`` (its entry is in ``SUBJECT``'s record)."""
POPULATION_TRACE_MAX = 3
IMPORTED = "kit-imported"
CLOCK_TOLERANCE = 1e-3
"""How far (seconds) a stored clock value may sit outside the commit window (ms stores)."""


async def populate(store: AsyncExecutionStore) -> None:
    """Give ``SUBJECT`` one of every record kind through commits (and some already gone).

    It ends at version 4 with marks ``in-1``/``in-2``, timers ``/a`` (re-armed) and ``/c``
    (``/b`` cancelled), the outbox entries ``from-peer``, ``self-2`` targeted at it
    (``self-1`` acked), the spawn intent ``kit-rec-other`` (``CHILD``'s acked) and trace
    steps 2-4 of 0-4 (``trace_max`` 3).  ``CHILD`` has one relay: ``to-child``.
    """
    store.trace_max = POPULATION_TRACE_MAX
    exe = new_exe(SUBJECT, status=Status.RUNNING, context={"n": 0})
    await store.commit(
        exe,
        [(SUBJECT, event("self-1")), (CHILD, event("to-child", k=[1])), (None, event("all"))],
        processed_event_id="in-1",
        timers=(TimerOp.schedule("/a", 10.0), TimerOp.schedule("/b", 20.0)),
        spawns=[(CHILD, "/fork/a", {"seed": {"n": 1}})],
        trace=step("Start", to_path="/a"),
    )
    peer = new_exe(PEER)
    await store.commit(
        peer,
        [(SUBJECT, event("from-peer"))],
        processed_event_id="in-1",
        spawns=[("kit-rec-peer-child", "/r", {})],
    )
    exe.context = {"n": 1}
    exe.active_path = "/b"
    await store.commit(
        exe,
        [(SUBJECT, event("self-2", deep={"x": 0.1 + 0.2}))],
        processed_event_id="in-2",
        timers=(
            TimerOp.schedule("/a", 15.5),
            TimerOp.cancel("/b"),
            TimerOp.schedule("/c", 0.1 + 0.2),
        ),
        spawns=[("kit-rec-other", "/fork/b", {"list": [1, "x"]})],
        trace=step("Go", from_path="/a", to_path="/b"),
    )
    for n in range(2):
        await store.commit(exe, [], trace=step("Go", n=n))
    await store.append_trace(SUBJECT, step("Manual", actions=["m.f"]))
    spawned = [s for s in await store.pending_spawns() if s.child_id == CHILD]
    await store.ack_spawn(spawned[0].seq)
    acked = [e for e in await store.pending_outbox() if e.event.id == "self-1"]
    await store.ack_outbox(acked[0].seq)


def reference_store() -> AsyncExecutionStore:
    """A fresh reference store (DictStore seen through the async contract)."""
    from harel.store.memory import DictStore

    return SyncAsAsync(DictStore())


async def reference_exports(ids: tuple[str, ...]) -> dict[str, ExecutionRecord | None]:
    """What the reference DictStore exports for ``ids`` after the same population."""
    reference = reference_store()
    await populate(reference)
    return {execution_id: await reference.export_execution(execution_id) for execution_id in ids}


def clockless(record: ExecutionRecord) -> ExecutionRecord:
    """``record`` with its clock values (``updated_at``, marks' times) zeroed."""
    return dataclasses.replace(
        record, updated_at=None, processed=tuple((e, 0.0) for e, _ in record.processed)
    )


def fields_of(record: ExecutionRecord) -> dict[str, Any]:
    """A record as comparable plain data: no ``seq``, no clock values."""
    exe = record.execution
    return {
        "execution_id": record.execution_id,
        "execution": None if exe is None else exe.model_dump(mode="json"),
        "processed": [event_id for event_id, _ in record.processed],
        "timers": [(path, repr(fire_at)) for path, fire_at in record.timers],
        "outbox": [(e.target_id, e.event.model_dump(mode="json")) for e in record.outbox],
        "spawns": [(s.parent_id, s.child_id, s.root_path, s.context) for s in record.spawns],
        "trace": list(record.trace),
    }


def assert_same_record(got: ExecutionRecord | None, expected: ExecutionRecord | None) -> None:
    """``got`` equals ``expected`` field by field and by digest (clock values aside)."""
    assert (got is None) == (expected is None), f"exported {got!r}, the reference {expected!r}"
    if got is None or expected is None:
        return
    assert isinstance(got, ExecutionRecord), f"export gave {type(got).__name__}"
    mine, theirs = fields_of(got), fields_of(expected)
    for name in theirs:
        assert mine[name] == theirs[name], (
            f"record {expected.execution_id!r} field {name!r}: the store exported "
            f"{mine[name]!r}, the reference DictStore {theirs[name]!r}"
        )
    assert record_digest(clockless(got)) == record_digest(clockless(expected))


def assert_seq_order(entries: tuple[OutboxEntry, ...] | tuple[SpawnEntry, ...]) -> None:
    """The entries' ``seq`` values are ints, strictly increasing."""
    seqs = [entry.seq for entry in entries]
    assert all(type(seq) is int for seq in seqs), f"seqs {seqs!r} are not ints"
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"seqs {seqs} out of order"


def assert_clock(value: float | None, start: float, end: float, what: str) -> None:
    """``value`` is epoch seconds inside ``[start, end]`` (give or take ``CLOCK_TOLERANCE``)."""
    assert isinstance(value, float), f"{what} is {value!r}, want epoch seconds as a float"
    assert start - CLOCK_TOLERANCE <= value <= end + CLOCK_TOLERANCE, (
        f"{what} {value!r} is outside the commit window [{start}, {end}]"
    )


def imported_record(execution_id: str = IMPORTED, **changes: Any) -> ExecutionRecord:
    """A hand-made record with values no store would pick by itself.

    Version 7, ``updated_at`` 1600000000.25, marks at 100.0 and 300.0, timers at 50.0 and
    1e9 + 0.5, three relays with source seqs 901/905/907, two spawn intents and trace steps
    40-42.  ``changes`` replace record fields.
    """
    exe = Execution(
        id=execution_id,
        definition_id="kit.flow",
        status=Status.RUNNING,
        active_path="/a",
        context={"k": [1, 2.5, None, "ü"]},
        processed_events=6,
        version=7,
    )
    record = ExecutionRecord(
        execution_id=execution_id,
        execution=exe,
        updated_at=1_600_000_000.25,
        processed=(("old", 100.0), ("young", 300.0)),
        timers=(("/a", 50.0), ("/b", 1e9 + 0.5)),
        outbox=(
            OutboxEntry(901, execution_id, event("r1")),
            OutboxEntry(905, execution_id, event("r2", n=2)),
            OutboxEntry(907, execution_id, event("r3")),
        ),
        spawns=(
            SpawnEntry(77, execution_id, f"{execution_id}-c1", "/fork/a", {"seed": 1}),
            SpawnEntry(78, execution_id, f"{execution_id}-c2", "/fork/b", {}),
        ),
        trace=tuple({**step("Go", n=n), "index": n} for n in range(40, 43)),
    )
    return dataclasses.replace(record, **changes)


def relay_ids(record: ExecutionRecord) -> list[str]:
    """The event ids of the record's outbox entries, in order."""
    return [entry.event.id for entry in record.outbox]


def _exe(execution_id: str, **fields: Any) -> Execution:
    return Execution(id=execution_id, definition_id="kit.flow", **fields)


INVALID: dict[str, tuple[Callable[[], Any], type[Exception]]] = {
    "relay targeted elsewhere": (
        lambda: imported_record(
            outbox=(
                OutboxEntry(1, IMPORTED, event("ok")),
                OutboxEntry(2, "kit-other", event("x")),
            )
        ),
        InvalidArgument,
    ),
    "untargeted relay": (
        lambda: imported_record(outbox=(OutboxEntry(1, None, event("x")),)),
        InvalidArgument,
    ),
    "spawn written by another": (
        lambda: imported_record(spawns=(SpawnEntry(1, "kit-other", "c", "/r", {}),)),
        InvalidArgument,
    ),
    "trace with a gap": (
        lambda: imported_record(trace=({**step("A"), "index": 0}, {**step("B"), "index": 2})),
        InvalidArgument,
    ),
    "trace descending": (
        lambda: imported_record(trace=({**step("A"), "index": 5}, {**step("B"), "index": 4})),
        InvalidArgument,
    ),
    "trace without index": (lambda: imported_record(trace=(step("A"),)), InvalidArgument),
    "version 0": (lambda: imported_record(execution=_exe(IMPORTED)), InvalidArgument),
    "execution of another id": (
        lambda: imported_record(execution=_exe("kit-other", version=1)),
        InvalidArgument,
    ),
    "marks without execution": (
        lambda: imported_record(execution=None, timers=(), spawns=(), trace=()),
        InvalidArgument,
    ),
    "timers without execution": (
        lambda: imported_record(execution=None, processed=(), spawns=(), trace=()),
        InvalidArgument,
    ),
    "event marked twice": (
        lambda: imported_record(processed=(("e", 1.0), ("e", 2.0))),
        InvalidArgument,
    ),
    "path armed twice": (
        lambda: imported_record(timers=(("/a", 1.0), ("/a", 2.0))),
        InvalidArgument,
    ),
    "NaN fire_at": (lambda: imported_record(timers=(("/a", math.nan),)), InvalidPayload),
    "infinite recorded_at": (
        lambda: imported_record(processed=(("e", math.inf),)),
        InvalidPayload,
    ),
    "empty id": (lambda: imported_record(""), InvalidIdentifier),
    "NUL in a child id": (
        lambda: imported_record(spawns=(SpawnEntry(1, IMPORTED, "c\x00", "/r", {}),)),
        InvalidIdentifier,
    ),
    "not a record": (lambda: {"execution_id": IMPORTED}, TypeError),
}
"""Records every store must refuse before writing anything, with the error they raise."""


async def commit_broadcast(store: AsyncExecutionStore, execution_id: str, event_id: str) -> None:
    """Store ``execution_id`` with one untargeted outbox entry ``event_id``."""
    await store.commit(new_exe(execution_id), [(None, event(event_id))])


async def commit_everything(store: AsyncExecutionStore, execution_id: str) -> None:
    """Store ``execution_id`` with a relay to itself, mark ``in-1``, timer ``/z``, one step."""
    await store.commit(
        new_exe(execution_id),
        [(execution_id, event("mine"))],
        processed_event_id="in-1",
        timers=[TimerOp.schedule("/z", 5.0)],
        trace=step("Start"),
    )
