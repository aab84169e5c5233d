"""Execution records on PostgreSQL: ``export_execution`` and ``import_execution``.

Export is ONE statement: PostgreSQL gives a statement one snapshot, so the execution row and
every array of its marks, timers, relays and trace steps come from the same instant.  Each
array is ordered by its table's key; the arrays of one table share that order, so they zip.

Import is ONE call of ``harel_import`` (layout version 2; version 4 adds the work rows the
record's timers, relays and spawns touch, written by the same call): the execution is
inserted only if absent, and when it is present the function returns false having written
nothing, which becomes :class:`ExecutionAlreadyExists` (two importers racing: the insert of
one waits for the other's, then sees it).  A record without an execution only appends its
outbox entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harel.store.author import (
    PreparedImport,
    check_id,
    decode_event,
    decode_execution,
    decode_trace_step,
    import_touches,
)
from harel.store.author.sql import Result, Statement
from harel.store.contract import ExecutionRecord, OutboxEntry, SpawnEntry
from harel.store.errors import ExecutionAlreadyExists

from harel_store_postgres._claims import work_arrays
from harel_store_postgres._rows import first_row, spawn_context

_EXPORT = (
    "SELECT e.data, e.updated_at, "
    "ARRAY(SELECT p.event_id FROM {schema}.processed_events AS p "
    "WHERE p.execution_id = k.id ORDER BY p.event_id), "
    "ARRAY(SELECT p.processed_at FROM {schema}.processed_events AS p "
    "WHERE p.execution_id = k.id ORDER BY p.event_id), "
    "ARRAY(SELECT t.path FROM {schema}.timers AS t WHERE t.execution_id = k.id ORDER BY t.path), "
    "ARRAY(SELECT t.fire_at FROM {schema}.timers AS t "
    "WHERE t.execution_id = k.id ORDER BY t.path), "
    "ARRAY(SELECT o.seq FROM {schema}.outbox AS o WHERE o.target_id = k.id ORDER BY o.seq), "
    "ARRAY(SELECT o.event FROM {schema}.outbox AS o WHERE o.target_id = k.id ORDER BY o.seq), "
    "ARRAY(SELECT s.seq FROM {schema}.spawns AS s WHERE s.parent_id = k.id ORDER BY s.seq), "
    "ARRAY(SELECT s.child_id FROM {schema}.spawns AS s WHERE s.parent_id = k.id ORDER BY s.seq), "
    "ARRAY(SELECT s.root_path FROM {schema}.spawns AS s "
    "WHERE s.parent_id = k.id ORDER BY s.seq), "
    "ARRAY(SELECT s.context FROM {schema}.spawns AS s WHERE s.parent_id = k.id ORDER BY s.seq), "
    "ARRAY(SELECT r.idx FROM {schema}.trace AS r WHERE r.execution_id = k.id ORDER BY r.idx), "
    "ARRAY(SELECT r.entry FROM {schema}.trace AS r WHERE r.execution_id = k.id ORDER BY r.idx) "
    'FROM (SELECT %s::text COLLATE "C" AS id) AS k '
    "LEFT JOIN {schema}.executions AS e ON e.id = k.id"
)
"""Everything stored for one id, in one statement: the execution row (NULLs when absent)
and, per table, parallel arrays in key order."""


def export_statement(execution_id: str) -> Statement:
    """The one statement that reads everything stored for ``execution_id`` (validated)."""
    return Statement(_EXPORT, (check_id(execution_id),))


def record_from_row(execution_id: str, row: Sequence[Any]) -> ExecutionRecord | None:
    """The record the export statement's row describes; ``None`` when it holds nothing."""
    data, updated_at, events, marked, paths, fire_at = row[:6]
    outbox_seqs, outbox_events, spawn_seqs, children, roots, contexts, indices, steps = row[6:]
    what = f"execution {execution_id!r}"
    record = ExecutionRecord(
        execution_id=execution_id,
        execution=None if data is None else decode_execution(data, what=what),
        updated_at=None if updated_at is None else float(updated_at),
        processed=tuple(zip(events, map(float, marked), strict=True)),
        timers=tuple(zip(paths, map(float, fire_at), strict=True)),
        outbox=tuple(
            OutboxEntry(int(seq), execution_id, decode_event(text, what=f"outbox entry {seq}"))
            for seq, text in zip(outbox_seqs, outbox_events, strict=True)
        ),
        spawns=tuple(
            SpawnEntry(int(seq), execution_id, child, root, spawn_context(text, seq))
            for seq, child, root, text in zip(spawn_seqs, children, roots, contexts, strict=True)
        ),
        trace=tuple(
            decode_trace_step(text, int(idx), what=f"trace step {idx} of {what}")
            for idx, text in zip(indices, steps, strict=True)
        ),
    )
    return None if record.is_empty else record


_IMPORT = (
    "SELECT {schema}.harel_import(%s::text, %s::boolean, %s::text, %s::text, %s::text, "
    "%s::text, %s::text, %s::bigint, %s::float8, %s::text, %s::text[], %s::float8[], "
    "%s::text[], %s::float8[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::bigint[], %s::text[], %s::text[], %s::float8[], %s::int[], %s::boolean[])"
)


def import_statement(prepared: PreparedImport) -> Statement:
    """The one call of ``harel_import`` that writes ``prepared`` (validated by core)."""
    exe = prepared.execution
    columns: tuple[Any, ...] = (
        (False, None, None, None, None, None, None, None, None)
        if exe is None
        else (
            True,
            exe.definition_id,
            exe.status,
            exe.outcome,
            exe.active_path,
            exe.parent_id,
            exe.version,
            exe.updated_at,
            exe.document,
        )
    )
    return Statement(
        _IMPORT,
        (
            prepared.execution_id,
            *columns,
            [event_id for event_id, _ in prepared.processed],
            [at for _, at in prepared.processed],
            [path for path, _ in prepared.timers],
            [fire_at for _, fire_at in prepared.timers],
            [emit.target_id for emit in prepared.emits],
            [emit.event_json for emit in prepared.emits],
            [spawn.child_id for spawn in prepared.spawns],
            [spawn.root_path for spawn in prepared.spawns],
            [spawn.context_json for spawn in prepared.spawns],
            [index for index, _ in prepared.trace],
            [step for _, step in prepared.trace],
            *work_arrays(import_touches(prepared)),
        ),
    )


def check_imported(prepared: PreparedImport, result: Result) -> None:
    """``ExecutionAlreadyExists`` when ``harel_import`` found the execution stored."""
    if not first_row(result)[0]:
        raise ExecutionAlreadyExists(prepared.execution_id)
