"""The store's IO-free logic: the shape of its files and what each operation writes.

Nothing here touches the disk.  :class:`StoreState` is ``state.json`` in memory,
:class:`TraceRing` is one ``traces/<name>.json``; the functions turn a validated
:class:`~harel.store.common.PreparedCommit` into the list of ``(relative path, text)`` writes
that the IO layer performs atomically.  Floats go through :mod:`json` (``repr``), so timer
times round-trip bit-exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harel.model import ExecutionSummary
from harel.store.common import PreparedCommit, next_trace_index, trace_keep_from
from harel.store.contract import DueTimer
from harel.store.errors import SchemaVersionError

from harel_example_jsondir import _layout

FORMAT = 1
"""Version of the directory layout; a directory written by another format is refused."""

Write = tuple[str, str]
"""``(relative path, full new text)`` of one file."""


def _check_format(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise SchemaVersionError(
            f"{what} has layout format {found!r}, this harel-example-jsondir reads format "
            f"{FORMAT}; open the directory with the release that wrote it or start a new one"
        )
    return data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


@dataclass
class StoreState:
    """Everything but documents and traces: the execution index and the relay tables."""

    next_seq: int = 1
    executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    outbox: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    spawns: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    processed: dict[str, set[str]] = field(default_factory=dict)
    timers: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> StoreState:
        """Read ``state.json`` (``None``: the file does not exist yet, an empty store)."""
        if text is None:
            return cls()
        data = _check_format(json.loads(text), _layout.STATE)
        return cls(
            next_seq=data["next_seq"],
            executions=data["executions"],
            outbox={seq: (target, event) for seq, target, event in data["outbox"]},
            spawns={
                seq: (parent, child, root, context)
                for seq, parent, child, root, context in data["spawns"]
            },
            processed={key: set(events) for key, events in data["processed"].items()},
            timers={(exe, path): float(fire_at) for exe, path, fire_at in data["timers"]},
        )

    def dump(self) -> str:
        """The text of ``state.json``."""
        return _dump(
            {
                "format": FORMAT,
                "next_seq": self.next_seq,
                "executions": self.executions,
                "outbox": [[seq, *row] for seq, row in sorted(self.outbox.items())],
                "spawns": [[seq, *row] for seq, row in sorted(self.spawns.items())],
                "processed": {key: sorted(events) for key, events in self.processed.items()},
                "timers": [[exe, path, at] for (exe, path), at in sorted(self.timers.items())],
            }
        )

    def version_of(self, execution_id: str) -> int | None:
        """The stored version of an execution, ``None`` when it is not stored."""
        row = self.executions.get(execution_id)
        return None if row is None else int(row["version"])

    def summaries(self) -> list[ExecutionSummary]:
        """Every stored execution's summary, ordered by id."""
        return [
            ExecutionSummary(id=execution_id, **row)
            for execution_id, row in sorted(self.executions.items())
        ]

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


@dataclass
class TraceRing:
    """One execution's retained trace steps (JSON text by index) and its highest index."""

    last: int | None = None
    steps: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> TraceRing:
        """Read a trace file (``None``: no step was ever written)."""
        if text is None:
            return cls()
        data = _check_format(json.loads(text), "trace file")
        return cls(last=data["last"], steps={index: body for index, body in data["steps"]})

    def dump(self) -> str:
        """The text of the trace file."""
        steps = [[index, body] for index, body in sorted(self.steps.items())]
        return _dump({"format": FORMAT, "last": self.last, "steps": steps})

    def append(self, body: str, trace_max: int | None) -> None:
        """Stamp the next index on ``body`` and trim to the last ``trace_max`` steps."""
        index = next_trace_index(self.last)
        keep_from = trace_keep_from(index, trace_max)
        self.steps[index] = body
        self.last = index
        if keep_from is not None:
            for old in [i for i in self.steps if i < keep_from]:
                del self.steps[old]

    def ordered(self) -> Iterable[tuple[int, str]]:
        """``(index, body)`` oldest first."""
        return sorted(self.steps.items())


def summary_row(plan: PreparedCommit) -> dict[str, Any]:
    """The index entry of the committed execution (its listing summary without the id)."""
    return {
        "definition_id": plan.definition_id,
        "status": plan.status,
        "outcome": plan.outcome,
        "active_path": plan.active_path,
        "version": plan.new_version,
        "parent_id": plan.parent_id,
    }


def apply_commit(
    state: StoreState, plan: PreparedCommit, ring: TraceRing | None, trace_max: int | None
) -> None:
    """Apply a commit whose CAS already passed to ``state`` (and ``ring`` when it traces)."""
    execution_id = plan.execution_id
    state.executions[execution_id] = summary_row(plan)
    for emit in plan.emits:
        state.outbox[state.take_seq()] = (emit.target_id, emit.event_json)
    if plan.processed_event_id is not None:
        state.processed.setdefault(execution_id, set()).add(plan.processed_event_id)
    for op in plan.timers:
        if op.action == "schedule":
            state.timers[(execution_id, op.path)] = op.fire_at
        else:
            state.timers.pop((execution_id, op.path), None)
    for spawn in plan.spawns:
        state.spawns[state.take_seq()] = (
            execution_id,
            spawn.child_id,
            spawn.root_path,
            spawn.context_json,
        )
    if plan.trace is not None:
        if ring is None:
            raise ValueError("a commit with a trace step needs the execution's trace ring")
        ring.append(plan.trace, trace_max)


def commit_writes(
    state: StoreState, plan: PreparedCommit, ring: TraceRing | None, trace_max: int | None
) -> list[Write]:
    """The files one commit replaces: its document, ``state.json`` and maybe its trace."""
    apply_commit(state, plan, ring, trace_max)
    writes: list[Write] = [
        (_layout.document_path(plan.execution_id), plan.document),
        (_layout.STATE, state.dump()),
    ]
    if plan.trace is not None and ring is not None:
        writes.append((_layout.trace_path(plan.execution_id), ring.dump()))
    return writes
