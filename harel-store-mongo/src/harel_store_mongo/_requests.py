"""The requests the plans yield, and the filters and update pipelines they carry.

Every value that comes from a caller (ids, paths, event ids, JSON text, numbers) enters a
filter only as a plain value (``{"_id": execution_id}``, ``{"$in": [...]}``), never as a key or
an operator, and enters an update pipeline only inside ``{"$literal": ...}``, so a string such
as ``"$where"`` or ``"a.b"`` is data, never a field path or an operator.  Field names are all
constants of :mod:`harel_store_mongo._schema`.  Imports no driver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harel.store.author import WorkRow, WorkTouch
from harel.store.contract import FINISHED

from harel_store_mongo._moved import surely_absent
from harel_store_mongo._schema import (
    EXECUTIONS,
    INDEXES,
    MARKS,
    META,
    NUMBER,
    PRESENT,
    SCHEMA_ID,
    UNTARGETED,
    WORK,
    WRITERS_ID,
    receipt_field,
)

Method = Literal[
    "command",
    "find_one",
    "find",
    "aggregate",
    "update_one",
    "update_many",
    "find_one_and_update",
    "delete_one",
    "delete_many",
    "create_indexes",
    "list_indexes",
    "insert_many",
    "bulk_write",
]
CURSOR_METHODS = frozenset({"find", "aggregate", "list_indexes"})

INT32_MAX = 2**31 - 1
"""``$slice`` takes a 32-bit count: a larger ring is no ring at all."""


@dataclass(frozen=True, slots=True)
class Request:
    """One driver call: ``collection.method(*args, **kwargs)`` (``collection`` ``""``: the
    database itself).  ``find`` / ``aggregate`` results are drained to a list of documents."""

    collection: str
    method: Method
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cursor(self) -> bool:
        """Whether the call returns a cursor the driver drains to a list."""
        return self.method in CURSOR_METHODS


def lit(value: Any) -> dict[str, Any]:
    """``value`` as an expression that is never interpreted (no field path, no operator)."""
    return {"$literal": value}


def or_empty(name: str) -> dict[str, Any]:
    return {"$ifNull": [f"${name}", []]}


def _appended(name: str, items: Sequence[Any]) -> dict[str, Any]:
    return {"$concatArrays": [or_empty(name), lit(list(items))]}


def _without(name: str, keep: dict[str, Any]) -> dict[str, Any]:
    """The elements of array ``name`` for which ``keep`` holds (``$$this`` is the element)."""
    return {"$filter": {"input": or_empty(name), "cond": keep}}


def _is_false(condition: dict[str, Any]) -> dict[str, Any]:
    """``not condition`` (spelled with ``$eq``: mongomock misreads ``$not``'s argument list)."""
    return {"$eq": [condition, False]}


def minimum(path: str) -> dict[str, Any]:
    """The smallest value under ``path`` of an array (null when the array is empty)."""
    return {"$min": f"${path}"}


def _trace_fields(step_json: str, trace_max: int | None) -> dict[str, Any]:
    """Append one step to the ring and count it; the ring keeps the last ``trace_max``."""
    grown = _appended("trace", [step_json])
    ring = grown if not trace_max or trace_max > INT32_MAX else {"$slice": [grown, -trace_max]}
    return {"trace": ring, "trace_next": {"$add": [{"$ifNull": ["$trace_next", 0]}, 1]}}


# -- the commit ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitWrite:
    """What a commit stores besides its snapshot, with seqs already allocated."""

    outbox: tuple[dict[str, Any], ...] = ()
    spawns: tuple[dict[str, Any], ...] = ()
    timer_paths: tuple[str, ...] = ()
    """Every path the commit schedules or cancels (its old timer goes)."""
    schedules: tuple[dict[str, Any], ...] = ()
    mark: dict[str, Any] | None = None
    trace: str | None = None
    seq_hi: int | None = None
    """The highest seq of ``outbox`` and ``spawns`` (``None``: the commit writes no entry)."""


def commit_pipeline(
    summary: Mapping[str, Any], write: CommitWrite, trace_max: int | None
) -> list[dict[str, Any]]:
    """The update pipeline of one commit: ``summary`` (version, token, data and the listing
    fields) replaces the old values, the side data is appended/filtered, and a second stage
    recomputes the sweep keys of the arrays that changed."""
    stage: dict[str, Any] = {name: lit(value) for name, value in summary.items()}
    keys: dict[str, Any] = {}
    if write.outbox:
        stage["outbox"] = _appended("outbox", write.outbox)
        keys["outbox_next"] = minimum("outbox.seq")
    if write.spawns:
        stage["spawns"] = _appended("spawns", write.spawns)
        keys["spawns_next"] = minimum("spawns.seq")
    if write.seq_hi is not None:  # the filter refused a document holding this seq or a higher
        stage["seq_hi"] = lit(write.seq_hi)
    if write.timer_paths:
        untouched = {
            "$filter": {
                "input": or_empty("timers"),
                "cond": _is_false({"$in": ["$$this.path", lit(list(write.timer_paths))]}),
            }
        }
        stage["timers"] = {"$concatArrays": [untouched, lit(list(write.schedules))]}
        keys["timers_next"] = minimum("timers.at")
    if write.mark is not None:  # the filter refused a document holding it already
        stage["processed"] = _appended("processed", [write.mark])
        keys["marks_since"] = minimum("processed.at")
        keys["marks_n"] = {"$size": or_empty("processed")}
    if write.trace is not None:
        stage.update(_trace_fields(write.trace, trace_max))
    return [{"$set": stage}, {"$set": keys}] if keys else [{"$set": stage}]


def _seq_guard(query: dict[str, Any], first_seq: int | None) -> dict[str, Any]:
    """``query`` also requiring every seq the document's commits wrote (``seq_hi``, absent on
    a document that wrote none) to be below ``first_seq``, the commit's first seq: one
    execution's entries strictly increase in commit order whatever the writers' clocks."""
    if first_seq is not None:
        query["$nor"] = [{"seq_hi": {"$gte": first_seq}}]
    return query


def commit_filter(
    execution_id: str,
    expected_version: int,
    base: str | None,
    event_id: str | None,
    first_seq: int | None = None,
) -> dict[str, Any]:
    """The filter of a commit's write: everything the commit checks, so the server applies it
    (atomically: one document) or writes nothing.

    The version CAS; for an update with a fence (``base``), the receipt of the expected
    version must be ``base`` (the commit that wrote the stored version is this copy's last
    one); for an update carrying a dedupe mark, the document must not hold that mark and must
    not have moved it out: no marks moved out (``marks_out``), or one of the mark's bits clear
    in the moved-mark filter (:mod:`harel_store_mongo._moved`; when every bit is set the write
    misses and the plan decides on ``marks``); for a commit writing outbox entries or spawn
    intents, its first seq above the document's ``seq_hi`` (:func:`_seq_guard`).  An insert
    (``expected_version == 0``) is an upsert on ``{_id, version: 0}``: a relay-only document
    holds no mark and no receipt (but may hold a ``seq_hi``).
    """
    query: dict[str, Any] = {"_id": execution_id, "version": expected_version}
    _seq_guard(query, first_seq)
    if expected_version == 0:
        return query
    if base is not None:
        query[receipt_field(expected_version)] = base
    if event_id is not None:
        query["processed.event"] = {"$ne": event_id}
        query["$or"] = [{"marks_out": {"$ne": True}}, {"mf": {"$regex": surely_absent(event_id)}}]
    return query


def exact_commit_filter(
    execution_id: str,
    expected_version: int,
    receipt: str | None,
    event_id: str | None,
    first_seq: int | None = None,
) -> dict[str, Any]:
    """The filter of a write re-sent after the plan found (by reading) that it applies: the
    document still at ``expected_version`` with the receipt it was read with (so no commit
    landed since), still without the mark (``marks`` was read: the event was not moved out,
    and a mark is moved only out of the document, never into it), and the commit's first seq
    (issued again above the ``seq_hi`` read, when that was in the way) still above
    ``seq_hi``.  An insert re-sent: ``{_id, version: 0}`` and the seq guard."""
    query: dict[str, Any] = {"_id": execution_id, "version": expected_version}
    _seq_guard(query, first_seq)
    if expected_version == 0:
        return query
    query[receipt_field(expected_version)] = receipt
    if event_id is not None:
        query["processed.event"] = {"$ne": event_id}
    return query


def commit_request(
    query: Mapping[str, Any],
    summary: Mapping[str, Any],
    write: CommitWrite | None,
    trace_max: int | None,
) -> Request:
    """The commit: ONE ``update_one`` on ``query`` (:func:`commit_filter`).

    A state-only commit (``write`` ``None``: no side data) is a plain ``$set`` of the summary
    fields, values as they are (an update document never reads a value as a path or an
    operator), so no pipeline is evaluated; any other commit is :func:`commit_pipeline`.  An
    insert (``query`` on ``version: 0``) is an upsert: it creates the document (or takes over
    a relay-only one), and a document already stored at a real version makes it fail with a
    duplicate key (a lost CAS).

    A commit that writes a dedupe mark is a ``find_one_and_update`` instead (the same one
    round trip), whose reply is the document's new mark count (``None``: the filter missed),
    so the plan knows when to move old marks out.
    """
    update: Any = {"$set": dict(summary)}
    if write is not None:
        update = commit_pipeline(summary, write, trace_max)
    kwargs: dict[str, Any] = {"upsert": True} if query["version"] == 0 else {}
    if write is not None and write.mark is not None:
        kwargs.update(projection={"marks_n": 1}, return_document=True)
        return Request(EXECUTIONS, "find_one_and_update", (dict(query), update), kwargs)
    return Request(EXECUTIONS, "update_one", (dict(query), update), kwargs)


def append_outbox_request(execution_id: str, entries: Sequence[Mapping[str, Any]]) -> Request:
    """Append outbox ``entries`` (as stored, seqs allocated) to the id's document with no
    condition and without reading it: ONE upsert that creates a relay-only document
    ``{_id, version: 0, outbox}`` when nothing is stored, and recomputes ``outbox_next``
    (an enqueue's entry; a relays-only record's entries)."""
    stage = {"outbox": _appended("outbox", entries), "version": {"$ifNull": ["$version", lit(0)]}}
    pipeline = [{"$set": stage}, {"$set": {"outbox_next": minimum("outbox.seq")}}]
    return Request(EXECUTIONS, "update_one", ({"_id": execution_id}, pipeline), {"upsert": True})


def register_writer() -> Request:
    """Count one more writer registration (:mod:`harel_store_mongo._seq`); the reply's ``n``
    is this store's count.  The only write of ``meta`` besides the schema record, sent once
    per store (and once per rotation), never by a commit otherwise."""
    return Request(
        META,
        "find_one_and_update",
        ({"_id": WRITERS_ID}, {"$inc": {"n": 1}}),
        {"upsert": True, "return_document": True, "projection": {"n": 1}},
    )


def probe_commit(
    execution_id: str, new_version: int, expected_version: int, event_id: str | None
) -> Request:
    """What a commit whose filter missed needs to say why (one read): the stored version, the
    receipts of ``new_version`` (a re-send of a stored commit) and of ``expected_version``
    (the fence), whether the document holds the mark of ``event_id`` or has moved marks out,
    and its ``seq_hi``."""
    projection: dict[str, Any] = {"version": 1, "seq_hi": 1, receipt_field(new_version): 1}
    if expected_version:
        projection[receipt_field(expected_version)] = 1
    if event_id is not None:
        projection["marks_out"] = 1
        projection["processed"] = {"$elemMatch": {"event": event_id}}
    return Request(EXECUTIONS, "find_one", ({"_id": execution_id}, projection))


# -- marks moved out of their document ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MovedFilter:
    """A document's moved-mark filter as a move writes it (:mod:`harel_store_mongo._moved`):
    the bits, the marks entered since its last rebuild, the marks that rebuild counted."""

    bits: str
    count: int
    live: int


FILTER_FIELDS = ("marks_out", "mf", "mf_n", "mf_live", "mf_gen")
"""What a move reads besides the oldest marks: whether marks were moved out before, the
moved-mark filter and its counters, and ``mf_gen``, which every filter write increments."""


def mark_id(execution_id: str, event_id: str) -> dict[str, str]:
    """The ``_id`` of a moved mark (a sub-document: no separator can make two ids collide)."""
    return {"e": execution_id, "ev": event_id}


def oldest_marks(execution_id: str, count: int) -> Request:
    """The ``count`` oldest marks a document holds (marks are appended in commit order)."""
    projection = {
        "_id": 1,
        "processed": {"$slice": min(count, INT32_MAX)},
        **dict.fromkeys(FILTER_FIELDS, 1),
    }
    query = {"_id": execution_id, "version": {"$gte": 1}}
    return Request(EXECUTIONS, "find_one", (query, projection))


def copy_marks(execution_id: str, marks: Sequence[Mapping[str, Any]]) -> Request:
    """Insert those marks into ``marks`` (unordered: one already there is a duplicate key
    that does not stop the others)."""
    docs = [
        {"_id": mark_id(execution_id, m["event"]), "e": execution_id, "at": m["at"]} for m in marks
    ]
    return Request(MARKS, "insert_many", (docs,), {"ordered": False})


def drop_copied_marks(
    execution_id: str, events: Sequence[str], moved: MovedFilter, generation: Any
) -> Request:
    """Drop the copied marks from the document, record that it has marks outside and write
    its moved-mark filter — only while the filter is still the one read (``mf_gen`` as read:
    a racing move wrote none), so the filter always holds every mark moved out."""
    query = {"_id": execution_id, "version": {"$gte": 1}, "mf_gen": generation}
    keep = _is_false({"$in": ["$$this.event", lit(list(events))]})
    next_generation = generation + 1 if type(generation) is int else 1
    pipeline = [
        {
            "$set": {
                "processed": _without("processed", keep),
                "marks_out": lit(True),
                "mf": lit(moved.bits),
                "mf_n": lit(moved.count),
                "mf_live": lit(moved.live),
                "mf_gen": lit(next_generation),
            }
        },
        {
            "$set": {
                "marks_since": minimum("processed.at"),
                "marks_n": {"$size": or_empty("processed")},
            }
        },
    ]
    return Request(EXECUTIONS, "update_one", (query, pipeline))


def moved_mark(execution_id: str, event_id: str) -> Request:
    """Whether that mark is in ``marks``."""
    query = {"_id": {"$eq": mark_id(execution_id, event_id)}}
    return Request(MARKS, "find_one", (query, {"_id": 1}))


def moved_marks_of(execution_id: str) -> Request:
    """Every moved mark of one execution (an export)."""
    return Request(MARKS, "find", ({"e": execution_id}, {"_id": 1, "at": 1}))


def drop_moved_marks_of(execution_id: str) -> Request:
    """Delete every moved mark of one execution (a purge)."""
    return Request(MARKS, "delete_many", ({"e": execution_id},))


def aged_moved_marks(older_than: float, batch_size: int) -> Request:
    """Up to ``batch_size`` moved marks recorded before ``older_than``."""
    return Request(
        MARKS,
        "find",
        ({"at": {**NUMBER, "$lt": older_than}}, {"_id": 1}),
        {"limit": _cap(batch_size)},
    )


def drop_moved_marks(ids: Sequence[Any], older_than: float) -> Request:
    """Delete those moved marks while they are still old (the reply counts what went)."""
    query = {"_id": {"$in": list(ids)}, "at": {"$lt": older_than}}
    return Request(MARKS, "delete_many", (query,))


# -- open -----------------------------------------------------------------------------------------


def claim_schema(version: int, written_by: str) -> Request:
    """Record ``version`` and the release writing it in a new database; the reply is the
    schema record (another opener's, when it came first)."""
    return Request(
        META,
        "find_one_and_update",
        ({"_id": SCHEMA_ID}, {"$setOnInsert": {"version": version, "written_by": written_by}}),
        {"upsert": True, "return_document": True},
    )


def read_schema() -> Request:
    """Read the schema record (``None`` in an empty database)."""
    return Request(META, "find_one", ({"_id": SCHEMA_ID},))


def upgrade_schema(found: int, version: int, written_by: str) -> Request:
    """Record the upgrade from ``found`` to ``version``, only while the record still says
    ``found`` (racing upgraders: one writes, the others match nothing)."""
    query = {"_id": SCHEMA_ID, "version": found}
    update = {"$set": {"version": version, "written_by": written_by}}
    return Request(META, "update_one", (query, update))


def create_indexes(collection: str) -> Request:
    """Every index of :data:`~harel_store_mongo._schema.INDEXES` on ``collection`` (no-op
    when present)."""
    specs = tuple(spec for spec in INDEXES if spec.collection == collection)
    return Request(collection, "create_indexes", (specs,))


def any_document(collection: str) -> Request:
    """One document of ``collection``, only its ``_id`` (``None`` when it is empty)."""
    return Request(collection, "find_one", ({}, {"_id": 1}))


def list_indexes(collection: str) -> Request:
    """The indexes ``collection`` has (before creating ours: a clash is refused)."""
    return Request(collection, "list_indexes")


def build_info() -> Request:
    """The server's version (``buildInfo``)."""
    return Request("", "command", ("buildInfo",))


# -- single-document writes -----------------------------------------------------------------------


def append_trace_request(execution_id: str, step_json: str, trace_max: int | None) -> Request:
    """Append a step to a stored execution's ring (never creates a document)."""
    query = {"_id": execution_id, "version": {"$gte": 1}}
    return Request(
        EXECUTIONS, "update_one", (query, [{"$set": _trace_fields(step_json, trace_max)}])
    )


def delete_timer_request(execution_id: str, path: str, fire_at: float) -> Request:
    """Disarm ``path`` only while it holds exactly ``fire_at`` (the filter is the guard)."""
    query = {"_id": execution_id, "timers": {"$elemMatch": {"path": path, "at": fire_at}}}
    other = {
        "$or": [
            {"$ne": ["$$this.path", lit(path)]},
            {"$ne": ["$$this.at", lit(fire_at)]},
        ]
    }
    pipeline = [
        {"$set": {"timers": {"$filter": {"input": or_empty("timers"), "cond": other}}}},
        {"$set": {"timers_next": minimum("timers.at")}},
    ]
    return Request(EXECUTIONS, "update_one", (query, pipeline))


def ack_request(seq: int, *, spawns: bool) -> Request:
    """Remove one relay entry; the reply says whether a relay-only document is now empty."""
    array = "spawns" if spawns else "outbox"
    query = {f"{array}.seq": {**PRESENT, "$eq": seq}}
    pipeline = [
        {"$set": {array: _without(array, {"$ne": ["$$this.seq", lit(seq)]})}},
        {"$set": {f"{array}_next": minimum(f"{array}.seq")}},
    ]
    return Request(
        EXECUTIONS,
        "find_one_and_update",
        (query, pipeline),
        {"projection": {"version": 1, "outbox_next": 1}, "return_document": True},
    )


def drop_empty_relay(execution_ids: Sequence[str]) -> Request:
    """Delete relay-only documents whose last outbox entry is gone."""
    query = {"_id": {"$in": list(execution_ids)}, "version": 0, "outbox_next": None}
    return Request(EXECUTIONS, "delete_many", (query,))


# -- retention ------------------------------------------------------------------------------------


def _not_targeted(execution_id: str) -> dict[str, Any]:
    return {
        "$filter": {
            "input": or_empty("outbox"),
            "cond": {"$ne": ["$$this.target", lit(execution_id)]},
        }
    }


def purge_request(execution_id: str, force: bool) -> Request:
    """Turn the execution's document into a relay-only one (only the outbox entries it emitted
    to others or broadcast stay); unless ``force``, only when it is finished."""
    query: dict[str, Any] = {"_id": execution_id, "version": {"$gte": 1}}
    if not force:
        query["status"] = {"$in": sorted(status.value for status in FINISHED)}
    pipeline = [
        {
            "$project": {
                "_id": 1,
                "version": lit(0),
                "outbox": _not_targeted(execution_id),
                "seq_hi": "$seq_hi",
            }
        },
        {"$set": {"outbox_next": minimum("outbox.seq")}},
    ]
    return Request(
        EXECUTIONS,
        "find_one_and_update",
        (query, pipeline),
        {"projection": {"outbox_next": 1}, "return_document": True},
    )


def read_status(execution_id: str) -> Request:
    """The stored execution's status (why a purge did not match)."""
    query = {"_id": execution_id, "version": {"$gte": 1}}
    return Request(EXECUTIONS, "find_one", (query, {"status": 1}))


def targeting(execution_id: str) -> Request:
    """The documents holding outbox entries targeted at ``execution_id``."""
    query = {"outbox.target": {**PRESENT, "$eq": execution_id}}
    return Request(EXECUTIONS, "find", (query, {"_id": 1, "version": 1}))


def untarget(execution_ids: Sequence[str], target: str) -> Request:
    """Remove the outbox entries targeted at ``target`` from those documents."""
    query = {"_id": {"$in": list(execution_ids)}, "outbox.target": target}
    pipeline = [
        {"$set": {"outbox": _not_targeted(target)}},
        {"$set": {"outbox_next": minimum("outbox.seq")}},
    ]
    return Request(EXECUTIONS, "update_many", (query, pipeline))


def aged_marks(older_than: float, batch_size: int) -> Request:
    """Up to ``batch_size`` documents holding marks recorded before ``older_than``, oldest
    first, each with (at most ``batch_size`` of) those marks and no other field."""
    old = _without("processed", {"$lt": ["$$this.at", lit(older_than)]})
    pipeline = [
        {"$match": {"marks_since": {**NUMBER, "$lt": older_than}}},
        {"$sort": {"marks_since": 1}},
        {"$limit": batch_size},
        {"$project": {"marks_since": 1, "old": {"$slice": [old, min(batch_size, INT32_MAX)]}}},
    ]
    return Request(EXECUTIONS, "aggregate", (pipeline,))


def drop_marks(execution_id: str, events: Sequence[str], older_than: float) -> Request:
    """Drop those marks of one execution, only while every one is still there and old (so a
    concurrent prune never counts a mark twice)."""
    still = [{"$elemMatch": {"event": event, "at": {"$lt": older_than}}} for event in events]
    query = {"_id": execution_id, "processed": {"$all": still}}
    keep = {
        "$or": [
            _is_false({"$in": ["$$this.event", lit(list(events))]}),
            {"$gte": ["$$this.at", lit(older_than)]},
        ]
    }
    pipeline = [
        {"$set": {"processed": {"$filter": {"input": or_empty("processed"), "cond": keep}}}},
        {"$set": {"marks_since": minimum("processed.at")}},
    ]
    return Request(EXECUTIONS, "update_one", (query, pipeline))


def fix_marks_since(execution_id: str, seen: Any) -> Request:
    """Recompute a document's ``marks_since`` (it named no old mark)."""
    query = {"_id": execution_id, "marks_since": seen}
    return Request(
        EXECUTIONS, "update_one", (query, [{"$set": {"marks_since": minimum("processed.at")}}])
    )


# -- reads ----------------------------------------------------------------------------------------


def load_request(execution_id: str, event_id: str | None = None) -> Request:
    """The snapshot (and, with ``event_id``, that one mark if present) of one execution."""
    projection: dict[str, Any] = {"data": 1, "version": 1, "seq_hi": 1}
    if event_id is not None:
        projection["processed"] = {"$elemMatch": {"event": event_id}}
        projection["marks_out"] = 1
    return Request(EXECUTIONS, "find_one", ({"_id": execution_id}, projection))


def is_processed_request(execution_id: str, event_id: str) -> Request:
    """Whether that execution's document holds that mark, and whether it has moved marks out
    (nothing else is read)."""
    projection = {"_id": 1, "marks_out": 1, "processed": {"$elemMatch": {"event": event_id}}}
    return Request(EXECUTIONS, "find_one", ({"_id": execution_id}, projection))


def pending_request(spawns: bool, limit: int | None) -> Request:
    """The documents holding the ``limit`` oldest relay entries: the first ``limit`` by their
    smallest pending seq (any entry among the oldest ``limit`` is in one of them)."""
    array = "spawns" if spawns else "outbox"
    key = f"{array}_next"
    return Request(
        EXECUTIONS,
        "find",
        ({key: NUMBER}, {array: 1, "seq_hi": 1}),
        {"sort": [(key, 1)], "limit": _cap(limit)},
    )


def due_request(now: float, limit: int | None) -> Request:
    """The documents holding the ``limit`` first due timers: the first ``limit`` documents by
    ``(earliest timer, id)``."""
    return Request(
        EXECUTIONS,
        "find",
        ({"timers_next": {**NUMBER, "$lte": now}}, {"timers": 1}),
        {"sort": [("timers_next", 1), ("_id", 1)], "limit": _cap(limit)},
    )


def read_trace_request(execution_id: str) -> Request:
    """The ring and the count of steps ever written."""
    projection = {"version": 1, "trace": 1, "trace_next": 1}
    return Request(EXECUTIONS, "find_one", ({"_id": execution_id}, projection))


SUMMARY_FIELDS = (
    "definition_id",
    "status",
    "outcome",
    "active_path",
    "version",
    "parent_id",
    "updated_at",
)


def listing_request(
    statuses: Sequence[str] | None,
    definition_id: str | None,
    roots_only: bool,
    after: str | None,
    probe: int,
) -> Request:
    """One keyset page of summaries ordered by id (never the snapshot)."""
    query: dict[str, Any] = {"version": {"$gte": 1}}
    if definition_id is not None:
        query["definition_id"] = definition_id
    if statuses is not None:
        query["status"] = {"$in": list(statuses)}
    if roots_only:
        query["parent_id"] = None
    if after is not None:
        query["_id"] = {"$gt": after}
    projection = dict.fromkeys(SUMMARY_FIELDS, 1)
    return Request(
        EXECUTIONS, "find", (query, projection), {"sort": [("_id", 1)], "limit": _cap(probe)}
    )


def _cap(limit: int | None) -> int:
    """A find ``limit`` (0 = none); anything beyond 32 bits is as good as none."""
    return 0 if limit is None or limit > INT32_MAX else limit


# -- work rows (claims) ---------------------------------------------------------------------------

WORK_FIELDS = {"priority": 1, "ready_at": 1, "owner": 1, "tn": 1}


def work_id(key: str | None) -> str:
    """The ``_id`` of a group's work row (the untargeted group: ``""``)."""
    return UNTARGETED if key is None else key


def touch_request(changes: Sequence[WorkTouch]) -> Request:
    """Apply :func:`harel.store.author.touch` to rows (one request): an upsert per row, an
    unordered ``bulk_write`` of them for several rows (``args[0]``: ``(filter, pipeline)``
    pairs, which the drivers turn into upserting ``UpdateOne`` operations)."""
    updates = tuple(_touch(change) for change in changes)
    if len(updates) == 1:
        return Request(WORK, "update_one", updates[0], {"upsert": True})
    return Request(WORK, "bulk_write", (updates,), {"ordered": False})


def _touch(change: WorkTouch) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One row's touch as a filter and an update pipeline: inserted when absent, a free
    row's ``ready_at`` drops to ``due`` (a leased row's stays), ``priority`` is set when
    ``own``, and ``tn`` counts the touch (a repair only applies to the row it read)."""
    due = lit(change.due)
    current = {"$ifNull": ["$ready_at", due]}
    free = {"$eq": [{"$ifNull": ["$owner", None]}, None]}
    lower = {"$and": [free, {"$lt": [due, current]}]}
    priority = lit(change.priority)
    stage = {
        "priority": priority if change.own else {"$ifNull": ["$priority", priority]},
        "ready_at": {"$cond": [lower, due, current]},
        "owner": {"$ifNull": ["$owner", None]},
        "tn": {"$add": [{"$ifNull": ["$tn", 0]}, 1]},
    }
    return {"_id": work_id(change.key)}, [{"$set": stage}]


def ready_request(priority: int, now: float, limit: int) -> Request:
    """Up to ``limit`` ready rows (``ready_at <= now``) of one priority by ``(ready_at, _id)``
    (index ``work_ready``)."""
    query = {"priority": priority, "ready_at": {"$lte": now}}
    return Request(
        WORK,
        "find",
        (query, WORK_FIELDS),
        {"sort": [("priority", 1), ("ready_at", 1), ("_id", 1)], "limit": _cap(limit)},
    )


def held_request(priority: int, now: float, limit: int) -> Request:
    """Up to ``limit`` held rows (``owner`` set, ``ready_at > now``: a leased row's
    ``ready_at`` is its expiry) of one priority by ``(ready_at, _id)`` (index ``work_ready``;
    the free rows dated after ``now`` are walked past by the filter)."""
    query = {"priority": priority, "ready_at": {"$gt": now}, "owner": {"$type": "string"}}
    return Request(
        WORK,
        "find",
        (query, WORK_FIELDS),
        {"sort": [("priority", 1), ("ready_at", 1), ("_id", 1)], "limit": _cap(limit)},
    )


def units_request(key: str | None) -> Request:
    """The units of one group in one ``aggregate``: the timers and spawn intents of the
    execution's own document, and the outbox entries targeted at it from every document
    (``outbox_target`` index; the untargeted group: entries with a null target)."""
    targeted = {"$eq": ["$$this.target", lit(key)]}
    projection: dict[str, Any] = {
        "outbox": {"$filter": {"input": or_empty("outbox"), "cond": targeted}},
        "seq_hi": "$seq_hi",
    }
    holders = {"outbox.target": {**PRESENT, "$eq": key}}
    if key is None:
        query: dict[str, Any] = holders
    else:
        mine = {"$eq": ["$_id", lit(key)]}
        for name in ("version", "timers", "spawns"):
            projection[name] = {"$cond": [mine, f"${name}", None]}
        query = {"$or": [{"_id": key}, holders]}
    return Request(EXECUTIONS, "aggregate", ([{"$match": query}, {"$project": projection}],))


def read_work(key: str | None) -> Request:
    """One group's work row (``None``: absent)."""
    return Request(WORK, "find_one", ({"_id": work_id(key)}, WORK_FIELDS))


def lease_request(row: WorkRow, expires_at: float, owner: str) -> Request:
    """Lease a ready row while it is as it was read (its ``ready_at``, ``<= now``, and
    ``owner``): atomic on the document, so of racing claimers one wins and the reply of the
    others is ``None``; so is the reply when the row was leased, released and written anew
    meanwhile (the units read may be gone)."""
    query = {"_id": work_id(row.key), "ready_at": row.ready_at, "owner": row.owner}
    update = {"$set": {"ready_at": expires_at, "owner": owner}}
    return Request(WORK, "find_one_and_update", (query, update), {"projection": {"_id": 1}})


def renew_request(key: str | None, owner: str, now: float, expires_at: float) -> Request:
    """Extend ``owner``'s unexpired lease (``None``: not held by ``owner``, or expired)."""
    query = {"_id": work_id(key), "owner": owner, "ready_at": {"$gt": now}}
    update = {"$set": {"ready_at": expires_at}}
    return Request(WORK, "find_one_and_update", (query, update), {"projection": {"_id": 1}})


def settle_request(row: WorkRow, tn: Any, ready_at: float | None) -> Request:
    """Re-date a row as a free row at ``ready_at`` (``None``: delete it), only while it is
    exactly the row that was read (same ``ready_at``, ``owner`` and touch count)."""
    query = {"_id": work_id(row.key), "ready_at": row.ready_at, "owner": row.owner, "tn": tn}
    if ready_at is None:
        return Request(WORK, "delete_one", (query,))
    update = {"$set": {"ready_at": ready_at, "owner": None}}
    return Request(WORK, "update_one", (query, update))


def drop_fresh_work(changes: Sequence[WorkTouch]) -> Request:
    """Delete the rows of ``changes`` that are exactly as their touch inserted them (free, at
    the touch's ``due``, touched once): one ``delete_many``."""
    rows = [{"_id": work_id(change.key), "ready_at": change.due} for change in changes]
    query = {"$or": rows, "owner": None, "tn": 1}
    return Request(WORK, "delete_many", (query,))


def drop_work(key: str) -> Request:
    """Delete one group's work row (a purge)."""
    return Request(WORK, "delete_one", ({"_id": key},))


def stored_work() -> Request:
    """Every document holding timers, spawn intents or pending outbox entries, with only what
    the layout-4 upgrade needs to backfill work rows."""
    query = {"$or": [{"timers_next": NUMBER}, {"spawns_next": NUMBER}, {"outbox_next": NUMBER}]}
    projection = {"version": 1, "timers_next": 1, "spawns_next": 1, "outbox.target": 1}
    return Request(EXECUTIONS, "find", (query, projection))
