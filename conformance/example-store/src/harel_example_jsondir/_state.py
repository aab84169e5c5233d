"""The files of a jsondir directory as values: ``state.json`` and one trace ring (no IO).

:class:`StoreState` is ``state.json`` in memory, :class:`TraceRing` one ``traces/<name>.json``.
Each parses the exact text the store wrote and dumps it back; a file that does not parse as
what it should be raises :class:`~harel.store.errors.StoreCorrupted` naming the file.  Floats go
through :mod:`json` (``repr``), so timer times and commit times round-trip bit-exactly; strings
are written ASCII-escaped, so any id, event id or path (lone surrogates included) reads back
equal.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from harel.model import ExecutionSummary
from harel.store.author import (
    PRIORITIES,
    RECEIPT_WINDOW,
    PreparedCommit,
    PreparedEmit,
    PreparedEnqueue,
    PreparedExecution,
    PreparedImport,
    PreparedSpawn,
    WorkRow,
    WorkTouch,
    claim_order,
    import_touches,
    next_ready,
    next_trace_index,
    receipt_slot,
    relay_due,
    show,
    touch,
    trace_keep_from,
    work_touches,
)
from harel.store.contract import DueTimer
from harel.store.errors import StoreCorrupted

from harel_example_jsondir import _schema

Mark = tuple[str, str]
"""``(execution_id, event_id)`` of one dedupe mark."""

Relay = Literal["outbox", "spawns"]

Quarantined = tuple[Relay, list[Any], str]
"""A relay entry a sweep could not decode: its table, its row as stored, and why."""


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


@contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn a malformed file's parse error into ``StoreCorrupted`` naming ``what``."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreCorrupted(
            f"{what} is damaged ({type(exc).__name__}: {str(exc)[:200]}); "
            "restore the directory from a backup"
        ) from exc


@dataclass
class StoreState:
    """Everything but documents and traces: the execution index and the relay tables."""

    written_by: str | None = None
    """The release that created (or upgraded) the layout."""
    next_seq: int = 1
    executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    outbox: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    spawns: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    processed: dict[str, dict[str, float]] = field(default_factory=dict)
    timers: dict[tuple[str, str], float] = field(default_factory=dict)
    quarantine: dict[int, Quarantined] = field(default_factory=dict)
    """Relay entries moved aside by a sweep that could not decode them, by seq."""
    receipts: dict[str, list[str | None]] = field(default_factory=dict)
    """Per execution, the ring of the tokens that wrote its last ``RECEIPT_WINDOW`` versions
    (slot :func:`~harel.store.author.receipt_slot` of the version; ``None``: not written)."""
    work: dict[str | None, WorkRow] = field(default_factory=dict)
    """The work rows of the claims, by group (an execution id; ``None``: the untargeted
    outbox entries), stored as ``[key, priority, ready_at, owner]``."""

    @classmethod
    def parse(cls, text: str | None) -> StoreState:
        """Read ``state.json`` (``None``: the file does not exist yet, an empty store)."""
        if text is None:
            return cls()
        with _reading(_schema.STATE):
            data = _schema.check_format(json.loads(text), _schema.STATE)
            written_by = data["written_by"]
            return cls(
                written_by=None if written_by is None else str(written_by),
                next_seq=int(data["next_seq"]),
                executions={str(key): dict(row) for key, row in data["executions"].items()},
                outbox={int(seq): (target, event) for seq, target, event in data["outbox"]},
                spawns={
                    int(seq): (parent, child, root, context)
                    for seq, parent, child, root, context in data["spawns"]
                },
                processed={
                    str(key): {str(event): float(at) for event, at in marks.items()}
                    for key, marks in data["processed"].items()
                },
                timers={(exe, path): float(at) for exe, path, at in data["timers"]},
                quarantine={
                    int(seq): (_relay(table), list(row), str(why))
                    for seq, table, row, why in data["quarantine"]
                },
                receipts={str(key): _ring(ring) for key, ring in data["receipts"].items()},
                work={row.key: row for row in map(_work_row, data["work"])},
            )

    def dump(self) -> str:
        """The text of ``state.json``."""
        return _dump(
            {
                "format": _schema.FORMAT,
                "written_by": self.written_by,
                "next_seq": self.next_seq,
                "executions": self.executions,
                "outbox": [[seq, *row] for seq, row in sorted(self.outbox.items())],
                "spawns": [[seq, *row] for seq, row in sorted(self.spawns.items())],
                "processed": self.processed,
                "timers": [[exe, path, at] for (exe, path), at in sorted(self.timers.items())],
                "quarantine": [[seq, *entry] for seq, entry in sorted(self.quarantine.items())],
                "receipts": self.receipts,
                "work": [
                    [row.key, row.priority, row.ready_at, row.owner]
                    for row in sorted(self.work.values(), key=_by_key)
                ],
            }
        )

    def version_of(self, execution_id: str) -> int | None:
        """The stored version of an execution, ``None`` when it is not stored."""
        row = self.executions.get(execution_id)
        if row is None:
            return None
        with _reading(f"{_schema.STATE} (execution {show(execution_id)})"):
            return int(row["version"])

    def receipt_of(self, execution_id: str, version: int) -> str | None:
        """The token of the commit that wrote ``version`` of the execution, ``None`` when the
        ring does not hold it (older than the window, newer than stored, or never written)."""
        found = self.version_of(execution_id)
        ring = self.receipts.get(execution_id)
        if found is None or ring is None or not 0 <= found - version < RECEIPT_WINDOW:
            return None
        return ring[receipt_slot(version)]

    def status_of(self, execution_id: str) -> str | None:
        """The stored status of an execution, ``None`` when it is not stored."""
        row = self.executions.get(execution_id)
        return None if row is None else str(row.get("status"))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether the dedupe mark ``(execution_id, event_id)`` is stored."""
        return event_id in self.processed.get(execution_id, {})

    def summaries(self) -> list[ExecutionSummary]:
        """Every stored execution's summary, ordered by id."""
        rows = sorted(self.executions.items())
        with _reading(f"{_schema.STATE} (execution index)"):
            return [ExecutionSummary(id=execution_id, **row) for execution_id, row in rows]

    def due(self, now: float) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now`` ascending by ``(fire_at, id, path)``."""
        due = [(exe, path, at) for (exe, path), at in self.timers.items() if at <= now]
        due.sort(key=lambda item: (item[2], item[0], item[1]))
        return due

    def take_seq(self) -> int:
        """Allocate the next outbox/spawn sequence number."""
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def apply(self, plan: PreparedCommit) -> None:
        """Apply a commit whose checks already passed — CAS, fence, no stored mark of its event
        (everything but its trace step)."""
        execution_id = plan.execution_id
        self.executions[execution_id] = _index_row(plan, plan.new_version, plan.committed_at)
        ring = self.receipts.setdefault(execution_id, [None] * RECEIPT_WINDOW)
        ring[receipt_slot(plan.new_version)] = plan.token or None
        self._append_relays(execution_id, plan.emits, ())
        if plan.processed_event_id is not None:
            marks = self.processed.setdefault(execution_id, {})
            marks[plan.processed_event_id] = plan.committed_at  # new: the commit checked it
        for op in plan.timers:
            if op.action == "schedule":
                self.timers[(execution_id, op.path)] = op.fire_at
            else:
                self.timers.pop((execution_id, op.path), None)
        self._append_relays(execution_id, (), plan.spawns)
        self.touch_work(work_touches(plan))

    def apply_import(self, record: PreparedImport) -> None:
        """Apply an import whose execution (if any) is not stored: its index row as exported,
        its marks and timers, its relay entries under new seqs in record order."""
        execution_id, exe = record.execution_id, record.execution
        if exe is not None:
            self.executions[execution_id] = _index_row(exe, exe.version, exe.updated_at)
        if record.processed:
            self.processed.setdefault(execution_id, {}).update(record.processed)
        for path, fire_at in record.timers:
            self.timers[(execution_id, path)] = fire_at
        self._append_relays(execution_id, record.emits, record.spawns)
        self.touch_work(import_touches(record))

    def enqueue(self, prepared: PreparedEnqueue) -> int:
        """Apply a producer's enqueue: its outbox row under the next seq (written as a commit
        writes an emitted event) and its target's work-row touch; returns the seq.  The
        target's index row is neither read nor required."""
        (seq,) = self._append_outbox((prepared.emit,))
        self.touch_work((prepared.touch,))
        return seq

    def _append_outbox(self, emits: Iterable[PreparedEmit]) -> list[int]:
        """Append these outbox rows under new seqs, in order; their seqs."""
        seqs = []
        for emit in emits:
            seq = self.take_seq()
            self.outbox[seq] = (emit.target_id, emit.event_json)
            seqs.append(seq)
        return seqs

    def _append_relays(
        self, execution_id: str, emits: Iterable[PreparedEmit], spawns: Iterable[PreparedSpawn]
    ) -> None:
        self._append_outbox(emits)
        for spawn in spawns:
            row = (execution_id, spawn.child_id, spawn.root_path, spawn.context_json)
            self.spawns[self.take_seq()] = row

    def forget(self, execution_id: str) -> bool:
        """Drop the execution and everything that belongs to it; whether anything was dropped.

        Belongs to it: its index row, its dedupe marks, its timers, the outbox entries targeted
        at it, the spawn intents it wrote and its work row (a lease on it is gone).
        """
        before = self.size()
        self.work.pop(execution_id, None)
        self.executions.pop(execution_id, None)
        self.receipts.pop(execution_id, None)
        self.processed.pop(execution_id, None)
        self.timers = {key: at for key, at in self.timers.items() if key[0] != execution_id}
        self.outbox = {seq: row for seq, row in self.outbox.items() if row[0] != execution_id}
        self.spawns = {seq: row for seq, row in self.spawns.items() if row[0] != execution_id}
        self.quarantine = {
            seq: entry for seq, entry in self.quarantine.items() if entry[1][0] != execution_id
        }
        return self.size() != before

    def size(self) -> int:
        """How many records the state holds (index rows, marks, timers, relay entries, work
        rows)."""
        marks = sum(len(events) for events in self.processed.values())
        relays = len(self.outbox) + len(self.spawns) + len(self.quarantine)
        return len(self.executions) + marks + len(self.timers) + relays + len(self.work)

    def drop_relay(self, table: Relay, seq: int) -> bool:
        """Forget relay entry ``seq`` of ``table``; whether it was there."""
        rows: dict[int, Any] = self.outbox if table == "outbox" else self.spawns
        return rows.pop(seq, None) is not None

    def set_aside(self, table: Relay, seq: int, why: str) -> None:
        """Move relay entry ``seq`` of ``table`` to the quarantine (its owner — target or
        parent — stays its first item, so a purge of the owner still removes it)."""
        row = self.outbox.pop(seq) if table == "outbox" else self.spawns.pop(seq)
        self.quarantine[seq] = (table, list(row), why)

    def quarantined_of(self, execution_id: str) -> list[tuple[int, Quarantined]]:
        """The quarantined entries targeted at / written by ``execution_id``."""
        return [(s, e) for s, e in sorted(self.quarantine.items()) if e[1][0] == execution_id]

    def record_parts(
        self, execution_id: str
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]], list[int], list[int]]:
        """What ``execution_id`` owns here: its marks and its timers (sorted), the seqs of the
        outbox entries targeted at it and of the spawn intents it wrote (ascending)."""
        marks = sorted(self.processed.get(execution_id, {}).items())
        timers = sorted((p, at) for (exe, p), at in self.timers.items() if exe == execution_id)
        outbox = sorted(seq for seq, row in self.outbox.items() if row[0] == execution_id)
        spawns = sorted(seq for seq, row in self.spawns.items() if row[0] == execution_id)
        return marks, timers, outbox, spawns

    def marks_before(self, older_than: float, limit: int) -> list[Mark]:
        """Up to ``limit`` dedupe marks recorded strictly before ``older_than``, oldest first."""
        old = [
            (at, execution_id, event_id)
            for execution_id, marks in self.processed.items()
            for event_id, at in marks.items()
            if at < older_than
        ]
        old.sort()
        return [(execution_id, event_id) for _, execution_id, event_id in old[:limit]]

    def drop_marks(self, marks: Iterable[Mark]) -> None:
        """Remove these dedupe marks (an execution left without marks loses its entry)."""
        for execution_id, event_id in marks:
            events = self.processed.get(execution_id)
            if events is not None:
                events.pop(event_id, None)
                if not events:
                    del self.processed[execution_id]

    # -- claims: the work rows ---------------------------------------------------------------

    def touch_work(self, changes: Iterable[WorkTouch]) -> None:
        """Apply core's :func:`~harel.store.author.touch` rule for each change (a commit's or
        an import's, in the same ``state.json`` write)."""
        for change in changes:
            self.work[change.key] = touch(self.work.get(change.key), change)

    def ready_work(self, now: float, limit: int) -> list[WorkRow]:
        """Up to ``limit`` ready rows (``ready_at <= now``) of each priority, oldest first in
        their tier, merged in claim order (:func:`~harel.store.author.claim_order`)."""
        found: list[WorkRow] = []
        for priority in PRIORITIES:
            tier = [r for r in self.work.values() if r.priority == priority and r.ready_at <= now]
            found += heapq.nsmallest(limit, tier, key=lambda r: (r.ready_at, r.key or ""))
        return claim_order(found)

    def units_of(self, key: str | None) -> tuple[list[tuple[str, float]], list[int], list[int]]:
        """The units of a group: its armed timers ``(path, fire_at)``, the seqs of the outbox
        entries targeted at it and of the spawn intents it wrote (``None``: the untargeted
        outbox entries, no timer, no spawn), seqs ascending."""
        if key is None:
            return [], sorted(seq for seq, row in self.outbox.items() if row[0] is None), []
        _, timers, outbox, spawns = self.record_parts(key)
        return timers, outbox, spawns

    def settle_work(
        self,
        row: WorkRow,
        fire_ats: Iterable[float],
        has_relay: bool,
        now: float,
        retry_at: float | None,
    ) -> None:
        """Free ``row``, re-dated from what is left (:func:`~harel.store.author.next_ready`),
        or drop it when nothing is left."""
        ready = next_ready(fire_ats, has_relay, now, retry_at)
        if ready is None:
            self.work.pop(row.key, None)
        else:
            self.work[row.key] = WorkRow(row.key, row.priority, ready)

    def backfill_work(self, now: float) -> None:
        """The work rows of a directory written before claims existed (the upgrade to format
        5): per execution its earliest timer, per target its pending outbox entries and per
        parent its spawn intents (relay units written at ``now``: dated ``relay_due(now)``, as
        a commit dates them), all at priority 0 (an execution's own next commit sets its
        priority)."""
        due: dict[str | None, float] = {}
        for (execution_id, _), fire_at in self.timers.items():
            due[execution_id] = min(due.get(execution_id, fire_at), fire_at)
        relay = relay_due(now)
        owners = [row[0] for row in self.outbox.values()] + [r[0] for r in self.spawns.values()]
        for owner in owners:
            due[owner] = min(due.get(owner, relay), relay)
        self.work = {key: WorkRow(key, 0, ready_at) for key, ready_at in due.items()}


def _index_row(
    source: PreparedCommit | PreparedExecution, version: int, updated_at: float
) -> dict[str, Any]:
    """One row of the execution index (the summary but its id)."""
    return {
        "definition_id": source.definition_id,
        "status": source.status,
        "outcome": source.outcome,
        "active_path": source.active_path,
        "version": version,
        "parent_id": source.parent_id,
        "updated_at": updated_at,
    }


def _ring(ring: Any) -> list[str | None]:
    """One stored receipt ring: ``RECEIPT_WINDOW`` tokens or nulls."""
    if not isinstance(ring, list) or len(ring) != RECEIPT_WINDOW:
        raise ValueError(f"a receipt ring must be a list of {RECEIPT_WINDOW}, got {ring!r}")
    return [None if token is None else str(token) for token in ring]


def _work_row(stored: Any) -> WorkRow:
    """One stored work row ``[key, priority, ready_at, owner]``."""
    key, priority, ready_at, owner = stored
    if not all(value is None or isinstance(value, str) for value in (key, owner)):
        raise ValueError(f"a work row has a key or owner that is not a string: {stored!r}")
    if isinstance(priority, bool) or priority not in PRIORITIES:
        raise ValueError(f"a work row has priority {priority!r}, not one of 0-4")
    if isinstance(ready_at, bool) or not isinstance(ready_at, (int, float)):
        raise ValueError(f"a work row has ready_at {ready_at!r}, not a number")
    return WorkRow(key, priority, float(ready_at), owner)


def _by_key(row: WorkRow) -> tuple[bool, str]:
    """Dump order of the work rows: the untargeted group first, then by key."""
    return row.key is not None, row.key or ""


def _relay(table: Any) -> Relay:
    if table not in ("outbox", "spawns"):
        raise ValueError(f"a quarantined entry names table {table!r}")
    return "outbox" if table == "outbox" else "spawns"


@dataclass
class TraceRing:
    """One execution's retained trace steps (JSON text by index) and its highest index."""

    execution_id: str
    last: int | None = None
    steps: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None, execution_id: str) -> TraceRing:
        """Read the trace file of ``execution_id`` (``None``: no step was ever written)."""
        if text is None:
            return cls(execution_id)
        what = f"the trace file of execution {show(execution_id)}"
        with _reading(what):
            data = _schema.check_format(json.loads(text), what, _schema.SAME_FILES)
            if data["id"] != execution_id:
                raise ValueError(f"it holds the trace of {show(data['id'])}")
            last = data["last"]
            steps = {int(index): str(body) for index, body in data["steps"]}
            return cls(execution_id, None if last is None else int(last), steps)

    def dump(self) -> str:
        """The text of the trace file."""
        steps = [[index, body] for index, body in sorted(self.steps.items())]
        return _dump(
            {"format": _schema.FORMAT, "id": self.execution_id, "last": self.last, "steps": steps}
        )

    def append(self, body: str, trace_max: int | None) -> None:
        """Stamp the next index on ``body`` and trim to the last ``trace_max`` steps."""
        index = next_trace_index(self.last)
        keep_from = trace_keep_from(index, trace_max)
        self.steps[index] = body
        self.last = index
        if keep_from is not None:
            for old in [i for i in self.steps if i < keep_from]:
                del self.steps[old]

    def ordered(self) -> list[tuple[int, str]]:
        """``(index, body)`` oldest first."""
        return sorted(self.steps.items())
