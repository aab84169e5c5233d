"""The commit envelope: validate and serialise a step once, and keep ``exe.version`` honest.

A backend's ``commit`` is::

    with committing(exe, emits, processed_event_id, timers, spawns, trace) as plan:
        ...send plan to the database; raise conflict(plan, found) when the CAS is lost...

``committing`` bumps ``exe.version`` before serialising (so the stored document carries the
new version) and restores it on *any* exception, including encoding errors and driver errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from harel.model import Event, Execution
from harel.store.common.codec import dumps, encode_event, encode_execution
from harel.store.common.trace import encode_trace_step
from harel.store.contract import Emit, Spawn, TimerOp
from harel.store.errors import StoreConflict


@dataclass(frozen=True, slots=True)
class PreparedEmit:
    """One outbox row: target and the encoded event."""

    target_id: str | None
    event_id: str
    event_json: str


@dataclass(frozen=True, slots=True)
class PreparedSpawn:
    """One spawn row: the child to create and its encoded initial context."""

    child_id: str
    root_path: str
    context_json: str


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    """Everything one commit writes, validated and encoded, ready for any backend's plan."""

    execution_id: str
    expected_version: int
    new_version: int
    definition_id: str
    status: str
    outcome: str | None
    active_path: str | None
    parent_id: str | None
    document: str
    emits: tuple[PreparedEmit, ...]
    processed_event_id: str | None
    timers: tuple[TimerOp, ...]
    spawns: tuple[PreparedSpawn, ...]
    trace: str | None
    committed_at: float
    """Epoch seconds (this process's clock) stored as the summary's ``updated_at`` and as the
    dedupe mark's age for ``prune_processed``."""

    @property
    def is_insert(self) -> bool:
        """True when the caller believes the execution was never stored."""
        return self.expected_version == 0

    @property
    def schedules(self) -> tuple[TimerOp, ...]:
        """The collapsed ``schedule`` ops."""
        return tuple(op for op in self.timers if op.action == "schedule")

    @property
    def cancels(self) -> tuple[TimerOp, ...]:
        """The collapsed ``cancel`` ops."""
        return tuple(op for op in self.timers if op.action == "cancel")


CasDecision = Literal["update", "insert", "conflict"]


def cas_decision(expected: int, found: int | None) -> CasDecision:
    """The contract's CAS rule given the stored version (``None`` = no record)."""
    if found is None:
        return "insert" if expected == 0 else "conflict"
    return "update" if found == expected else "conflict"


def conflict(plan: PreparedCommit, found: int | None) -> StoreConflict:
    """The :class:`StoreConflict` a lost CAS on ``plan`` raises."""
    return StoreConflict(plan.execution_id, plan.expected_version, found)


def collapse_timer_ops(ops: Sequence[TimerOp]) -> tuple[TimerOp, ...]:
    """Keep only the last op per path (in order of each path's last op).

    Applying the result in any order gives the same timers as applying ``ops`` in order.
    """
    last: dict[str, TimerOp] = {}
    for index, op in enumerate(ops):
        if not isinstance(op, TimerOp):
            raise TypeError(f"timers[{index}] must be a TimerOp, got {type(op).__name__}")
        last.pop(op.path, None)
        last[op.path] = op
    return tuple(last.values())


def _prepare_emits(emits: Sequence[Emit]) -> tuple[PreparedEmit, ...]:
    prepared = []
    for index, item in enumerate(emits):
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"emits[{index}] must be a (target_id, Event) tuple, got {item!r}")
        target, event = item
        if target is not None and not isinstance(target, str):
            raise TypeError(f"emits[{index}] target must be a str or None, got {target!r}")
        if not isinstance(event, Event):
            raise TypeError(f"emits[{index}] event must be an Event, got {type(event).__name__}")
        prepared.append(PreparedEmit(target, event.id, encode_event(event)))
    return tuple(prepared)


def _prepare_spawns(spawns: Sequence[Spawn]) -> tuple[PreparedSpawn, ...]:
    prepared = []
    for index, item in enumerate(spawns):
        if not (isinstance(item, tuple) and len(item) == 3):
            raise TypeError(
                f"spawns[{index}] must be a (child_id, root_path, context) tuple, got {item!r}"
            )
        child_id, root_path, context = item
        if not isinstance(child_id, str) or not child_id:
            raise TypeError(f"spawns[{index}] child_id must be a non-empty str")
        if not isinstance(root_path, str):
            raise TypeError(f"spawns[{index}] root_path must be a str")
        if not isinstance(context, dict):
            raise TypeError(f"spawns[{index}] context must be a dict")
        what = f"spawns[{index}] context of child {child_id!r}"
        prepared.append(PreparedSpawn(child_id, root_path, dumps(context, what=what)))
    return tuple(prepared)


def prepare_commit(
    exe: Execution,
    expected_version: int,
    emits: Sequence[Emit],
    processed_event_id: str | None,
    timers: Sequence[TimerOp],
    spawns: Sequence[Spawn],
    trace: dict[str, Any] | None,
) -> PreparedCommit:
    """Validate and encode one commit; ``exe.version`` must already be the new version."""
    if not isinstance(exe, Execution):
        raise TypeError(f"commit() needs an Execution, got {type(exe).__name__}")
    if not isinstance(exe.id, str) or not exe.id:
        raise ValueError("an execution id must be a non-empty str")
    if processed_event_id is not None and not isinstance(processed_event_id, str):
        raise TypeError(f"processed_event_id must be a str or None, got {processed_event_id!r}")
    if trace is not None and not isinstance(trace, dict):
        raise TypeError(f"trace must be a dict or None, got {type(trace).__name__}")
    return PreparedCommit(
        execution_id=exe.id,
        expected_version=expected_version,
        new_version=exe.version,
        definition_id=exe.definition_id,
        status=exe.status.value,
        outcome=exe.outcome,
        active_path=exe.active_path,
        parent_id=exe.parent_id,
        document=encode_execution(exe),
        emits=_prepare_emits(emits),
        processed_event_id=processed_event_id,
        timers=collapse_timer_ops(timers),
        spawns=_prepare_spawns(spawns),
        trace=None if trace is None else encode_trace_step(trace),
        committed_at=time.time(),
    )


@contextmanager
def committing(
    exe: Execution,
    emits: Sequence[Emit] = (),
    processed_event_id: str | None = None,
    timers: Sequence[TimerOp] = (),
    spawns: Sequence[Spawn] = (),
    trace: dict[str, Any] | None = None,
) -> Iterator[PreparedCommit]:
    """Bump ``exe.version``, yield the prepared commit, restore the version on any exception."""
    old = exe.version
    if isinstance(old, bool) or not isinstance(old, int) or old < 0:
        raise ValueError(f"execution version must be an int >= 0, got {old!r}")
    exe.version = old + 1
    try:
        yield prepare_commit(exe, old, emits, processed_event_id, timers, spawns, trace)
    except BaseException:
        exe.version = old
        raise
