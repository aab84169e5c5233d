"""Execution records (``harel migrate``): the requests and sans-IO plans of
``export_execution`` and ``import_execution``.  Imports no driver.

**Export** is ONE ``aggregate``: the execution's own document (snapshot, marks, timers, spawn
intents, trace ring) and every document holding outbox entries targeted at the id (its
emitters'), matched by one ``$or`` over ``_id`` and the ``outbox.target`` index, each shipped
with only those entries.  Each document is read atomically (so the execution and everything it
wrote is one consistent state); across documents one ``aggregate`` on a real server is not a
snapshot: an entry another execution emits or an ack removes while the read runs may or may
not be in it.  ``harel migrate`` runs with the workers stopped, where nothing moves.  On
mongomock the harness runs the call under one lock: a snapshot.

**Import** is ONE single-document upsert (its relays' new seqs come from the process's hybrid
clock, :mod:`harel_store_mongo._seq`: no request): the whole document — snapshot, summary,
marks, timers, spawn intents, trace ring and the record's outbox entries, re-targeted at the
id and stored in its own document — is written
by an update pipeline on ``{_id, version: 0}``, which creates it, or takes over a relay-only
document (keeping that one's entries), while an execution already stored makes the upsert a
duplicate key: ``ExecutionAlreadyExists``, nothing written.  Two racing importers: one wins.
A record without an execution appends its entries to the id's document with no condition
(creating a relay-only one when nothing is stored).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from harel.store.author import PreparedImport, check_id, import_touches, show
from harel.store.contract import ExecutionRecord, OutboxEntry
from harel.store.errors import ExecutionAlreadyExists, PayloadTooLarge, StoreCorrupted

from harel_store_mongo import _requests as rq
from harel_store_mongo._operations import (
    MAX_DOCUMENT_BYTES,
    DuplicateKey,
    Plan,
    execution_of,
    new_token,
    outbox_entry,
    reserve_seqs,
    retouch_plan,
    ring_steps,
    spawn_entry,
    touch_plan,
    utf8_size,
)
from harel_store_mongo._requests import Request, lit, minimum, or_empty
from harel_store_mongo._schema import EXECUTIONS, PRESENT, receipt_field
from harel_store_mongo._seq import SeqSource

E = TypeVar("E")

OWN_FIELDS = (
    "version",
    "data",
    "updated_at",
    "processed",
    "timers",
    "spawns",
    "trace",
    "trace_next",
    "marks_out",
)
"""What an export reads of the execution's own document (other documents: only entries)."""


# -- requests -------------------------------------------------------------------------------------


def export_request(execution_id: str) -> Request:
    """The id's own document and its emitters', each with only the entries targeted at it."""
    mine = {"$eq": ["$_id", lit(execution_id)]}
    targeted = {"$eq": ["$$this.target", lit(execution_id)]}
    projection: dict[str, Any] = {name: {"$cond": [mine, f"${name}", None]} for name in OWN_FIELDS}
    projection["outbox"] = {"$filter": {"input": or_empty("outbox"), "cond": targeted}}
    query = {"$or": [{"_id": execution_id}, {"outbox.target": {**PRESENT, "$eq": execution_id}}]}
    return Request(EXECUTIONS, "aggregate", ([{"$match": query}, {"$project": projection}],))


def import_request(
    prepared: PreparedImport,
    outbox: Sequence[dict[str, Any]],
    spawns: Sequence[dict[str, Any]],
    token: str,
) -> Request:
    """The one upsert of an import (see the module docstring): ``outbox`` and ``spawns`` hold
    the record's relays as stored, with their new seqs."""
    p = prepared
    exe = p.execution
    if exe is None:
        return rq.append_outbox_request(p.execution_id, outbox)
    stage: dict[str, Any] = {"outbox": {"$concatArrays": [or_empty("outbox"), lit(list(outbox))]}}
    keys: dict[str, Any] = {"outbox_next": minimum("outbox.seq")}
    query: dict[str, Any] = {"_id": p.execution_id, "version": 0}
    fields = {
        "version": exe.version,
        receipt_field(exe.version): token,
        "data": exe.document,
        "definition_id": exe.definition_id,
        "status": exe.status,
        "parent_id": exe.parent_id,
        "outcome": exe.outcome,
        "active_path": exe.active_path,
        "updated_at": exe.updated_at,
        "spawns": list(spawns),
        "processed": [{"event": event, "at": at} for event, at in p.processed],
        "timers": [{"path": path, "at": at} for path, at in p.timers],
        "trace": [body for _, body in p.trace],
        "trace_next": p.trace[-1][0] + 1 if p.trace else 0,
    }
    stage.update((name, lit(value)) for name, value in fields.items())
    if spawns:  # the execution's own entries: its later commits' seqs must be above them
        stage["seq_hi"] = {"$max": ["$seq_hi", lit(spawns[-1]["seq"])]}
    keys.update(
        spawns_next=minimum("spawns.seq"),
        timers_next=minimum("timers.at"),
        marks_since=minimum("processed.at"),
        marks_n={"$size": or_empty("processed")},
    )
    return _upsert(query, stage, keys)


def _upsert(query: dict[str, Any], stage: dict[str, Any], keys: dict[str, Any]) -> Request:
    pipeline = [{"$set": stage}, {"$set": keys}]
    return Request(EXECUTIONS, "update_one", (query, pipeline), {"upsert": True})


# -- plans ----------------------------------------------------------------------------------------


def check_import_size(prepared: PreparedImport, limit: int = MAX_DOCUMENT_BYTES) -> None:
    """Refuse, before anything is sent, a record whose document would not fit MongoDB's."""
    p = prepared
    size = 0 if p.execution is None else utf8_size(p.execution.document)
    size += sum(utf8_size(body) for _, body in p.trace)
    size += sum(utf8_size(e.event_json) for e in p.emits)
    size += sum(utf8_size(s.context_json) for s in p.spawns)
    size += 64 * (len(p.processed) + len(p.timers))
    size += sum(utf8_size(event) for event, _ in p.processed)
    size += sum(utf8_size(path) for path, _ in p.timers)
    if size > limit:
        raise PayloadTooLarge(
            f"the record of execution {show(p.execution_id)} needs about {size} bytes in one "
            f"document; this store holds at most {limit} bytes per execution (MongoDB documents "
            "hold 16 MiB): lower trace_max or prune old dedupe marks at the source"
        )


def import_plan(prepared: PreparedImport, where: str, seqs: SeqSource) -> Plan[None]:
    """Write ``prepared`` with one upsert (its relays' seqs issued by ``seqs``, in record
    order); ``ExecutionAlreadyExists`` with nothing written when the execution is already
    stored.
    Its work rows are upserted before the write and again after it (one request each time;
    the rows of a refused import are merely early)."""
    check_import_size(prepared)
    if prepared.execution is None and not prepared.emits:
        return  # an empty relays-only record: nothing to write
    count = len(prepared.emits) + len(prepared.spawns)
    issued = (yield from reserve_seqs(seqs, count, where)) if count else []
    emit_seqs, spawn_seqs = issued[: len(prepared.emits)], issued[len(prepared.emits) :]
    outbox = [
        {"seq": seq, "target": prepared.execution_id, "event": emit.event_json}
        for seq, emit in zip(emit_seqs, prepared.emits, strict=True)
    ]
    spawns = [
        {"seq": seq, "child": s.child_id, "root": s.root_path, "context": s.context_json}
        for seq, s in zip(spawn_seqs, prepared.spawns, strict=True)
    ]
    touches = import_touches(prepared)
    yield from touch_plan(touches)  # before the write, again after it: see _claims
    try:
        yield import_request(prepared, outbox, spawns, new_token())
    except DuplicateKey:
        raise ExecutionAlreadyExists(prepared.execution_id) from None
    yield from retouch_plan(touches, f"the import of {show(prepared.execution_id)}")


def export_plan(execution_id: str, seqs: SeqSource | None = None) -> Plan[ExecutionRecord | None]:
    """Everything stored for the id from one read (see the module docstring), or ``None``;
    ``seqs`` observes the entries read."""
    execution_id = check_id(execution_id)
    docs = yield export_request(execution_id)
    if seqs is not None:
        seqs.observe(docs)
    own: dict[str, Any] = {}
    outbox: list[OutboxEntry] = []
    what = f"the stored execution {show(execution_id)}"
    for doc in docs:
        if doc.get("_id") == execution_id:
            own = doc
        outbox += _exact(outbox_entry, doc, "outbox", what)
    outbox.sort(key=lambda entry: entry.seq)
    exe = execution_of(own or None, execution_id)
    processed = _pairs(own.get("processed"), "event", what)
    if exe is not None and own.get("marks_out") is True:
        moved = yield rq.moved_marks_of(execution_id)
        processed += _moved_pairs(moved, what)
    if exe is None:
        if not outbox:
            return None
        return ExecutionRecord(execution_id=execution_id, execution=None, outbox=tuple(outbox))
    return ExecutionRecord(
        execution_id=execution_id,
        execution=exe,
        updated_at=_number(own.get("updated_at"), what),
        processed=tuple(sorted(_first_ages(processed))),
        timers=tuple(sorted(_pairs(own.get("timers"), "path", what))),
        outbox=tuple(outbox),
        spawns=tuple(sorted(_exact(spawn_entry, own, "spawns", what), key=lambda e: e.seq)),
        trace=tuple(ring_steps(own, what)),
    )


def _exact(
    entry: Callable[[dict[str, Any], dict[str, Any]], E], doc: dict[str, Any], array: str, what: str
) -> list[E]:
    """Every entry of ``array`` of ``doc``; a damaged one is ``StoreCorrupted`` (an export is
    exact: it never skips what it cannot read, as the relay sweeps do)."""
    try:
        return [entry(doc, raw) for raw in doc.get(array) or []]
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorrupted(
            f"{what}: an entry of {array!r} in document {doc.get('_id')!r:.80} is unreadable "
            f"({exc!r:.80})"
        ) from exc


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StoreCorrupted(f"{what} holds the time {value!r:.80}, not a number")
    return float(value)


def _moved_pairs(docs: Any, what: str) -> list[tuple[str, float]]:
    """The ``(event, at)`` of moved marks (``marks`` documents)."""
    pairs = []
    for doc in docs or []:
        key = doc.get("_id") if isinstance(doc, dict) else None
        event = key.get("ev") if isinstance(key, dict) else None
        at = _number(doc.get("at"), what)
        if not isinstance(event, str) or at is None:
            raise StoreCorrupted(f"{what} has an unreadable moved mark {doc!r:.80}")
        pairs.append((event, at))
    return pairs


def _first_ages(pairs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """One pair per event (a mark being moved is briefly in both places), its first age."""
    first: dict[str, float] = {}
    for event, at in pairs:
        first[event] = min(at, first.get(event, at))
    return list(first.items())


def _pairs(items: Any, key: str, what: str) -> list[tuple[str, float]]:
    pairs = []
    for raw in items or []:
        name = raw.get(key) if isinstance(raw, dict) else None
        at = _number(raw.get("at") if isinstance(raw, dict) else None, what)
        if not isinstance(name, str) or at is None:
            raise StoreCorrupted(f"{what} holds an unreadable entry {raw!r:.80}")
        pairs.append((name, at))
    return pairs
