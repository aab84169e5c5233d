"""The IO-free operations of the MongoDB store: the requests each operation sends and how replies
become values.  ``sync.py`` (PyMongo) and ``aio.py`` (PyMongo async / motor) only execute these
plans through :func:`harel.store.author.drive` / :func:`~harel.store.author.adrive`, under the
contract's method names (:class:`~harel_store_mongo._plan.MongoPlan`).

Round trips (each request is one server call; a cursor holding more than one batch adds a
``getMore`` per further batch):

* open: ``buildInfo`` (a server without update pipelines, MongoDB < 4.2, is refused) and 1
  ``find_one`` of the schema record when the layout is ready (creating or upgrading it: +
  ``listIndexes`` and ``createIndexes`` per collection, an index of the same keys under another
  name is refused, + the record's write);
* commit: ONE write whose filter holds every check (the version CAS; for a copy this process
  stored, the fence: the receipt of the expected version is its last token; for a marked
  update, the mark neither in the document nor moved out, per the moved-mark filter of
  :mod:`harel_store_mongo._moved`), so it applies atomically (one document) or writes nothing;
  a state-only commit is a plain ``$set`` ``update_one``, any other writes everything the
  step writes in one update pipeline; a commit writing a dedupe mark is a
  ``find_one_and_update`` returning the document's mark count.  It also writes the commit
  token as the receipt of the new version.  The seqs of its emits and spawns come from the
  process's hybrid clock and the store's writer id (:mod:`harel_store_mongo._seq`): no
  request (the store's first such write registers its writer id: + 1, once, and again every
  10 minutes), and the filter requires them above the document's ``seq_hi``.  Each work
  row the commit touches (arming a timer or writing a spawn intent: its own; each emit
  target's) is upserted before the write and again after it, one request each time (an
  ``update_one``, a ``bulk_write`` for several rows: + 2; see :mod:`harel_store_mongo._claims`);
  a state-only commit touches none.  No commit writes a store-wide document.
  Once every 64 marks, a marked commit moves its document's oldest marks out: + 3 (read them,
  copy them to ``marks``, drop them and write the moved-mark filter; + 1 read of ``marks``
  when the filter is rebuilt);
* load, read_trace, append_trace, delete_timer, ack: 1 (an ack that empties a purged
  execution's relay-only document: 2); load_for_event, is_processed: 1, + 1 on ``marks`` when
  the mark is not in the document and the document has moved marks out;
* pending_outbox, pending_spawns, due_timers, list_executions: 1 indexed ``find``;
* a write that missed reads once more the stored version, the receipts of the new and the
  expected version, ``seq_hi`` and (marked) the mark: the commit's own token as the new
  version's receipt means it was already stored (success, even with its mark stored); else
  the mark stored (+ 1 read of ``marks`` when the document moved marks out) is
  ``AlreadyProcessed``, and a version or fence that does not hold is ``StoreConflict`` naming
  the stored version; when everything holds (a false positive of the moved-mark filter, or a
  ``seq_hi`` at or above the commit's first seq: another writer's clock runs ahead) the write
  is sent again under the version and receipt read, with seqs issued above that ``seq_hi``.
  A refused commit deletes the work rows its touch inserted (+ 1);
* export_execution: 1 ``aggregate``; import_execution: 1 upsert (+ 2 with work rows to
  touch) — see :mod:`harel_store_mongo._records`;
* claim: 5 ``find`` + 2 per row taken or repaired; renew: 1; release: 3 — see
  :mod:`harel_store_mongo._claims`;
* enqueue: 3 — the target's work row upserted, the one upsert appending the entry to the
  target's document, the row upserted again (:func:`enqueue_plan`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeGuard, TypeVar

from harel.model import Execution, ExecutionPage, ExecutionSummary, Status
from harel.store.author import (
    ListingQuery,
    PreparedCommit,
    PreparedEmit,
    PreparedEnqueue,
    Stored,
    WorkTouch,
    base_holds,
    cas_decision,
    check_event_ref,
    check_flag,
    check_id,
    check_now,
    check_prune,
    check_seq,
    check_timer_ref,
    decode_event,
    decode_execution,
    decode_payload,
    decode_trace_step,
    encode_trace_step,
    open_flow,
    page_from_probe,
    refuse_lost,
    relay_due,
    resent_and_stored,
    show,
    sweep_limit,
    trace_keep_from,
    work_touches,
)
from harel.store.contract import FINISHED, DueTimer, OutboxEntry, SpawnEntry
from harel.store.errors import (
    CommitOutcomeUnknown,
    ExecutionActive,
    ExecutionNotFound,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConfigError,
    StoreCorrupted,
    StoreError,
    StoreUnavailable,
)

from harel_store_mongo import _requests as rq
from harel_store_mongo._moved import REBUILD_AT, usable, with_marks
from harel_store_mongo._requests import CommitWrite, MovedFilter, Request
from harel_store_mongo._schema import (
    EXECUTIONS,
    INDEXES,
    MARKS,
    MARKS_HIGH,
    MARKS_KEPT,
    META,
    SCHEMA_VERSION,
    WORK,
    WORK_ROWS_SINCE,
    MongoLayout,
    receipt_field,
    stored_schema,
)
from harel_store_mongo._seq import SeqSource

log = logging.getLogger("harel_store_mongo")

T = TypeVar("T")
E = TypeVar("E")

Plan: TypeAlias = Generator[Request, Any, T]
"""A sans-IO operation returning ``T``: yields requests, is sent each request's result."""

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024 - 64 * 1024
"""What one commit may add to a document: MongoDB's 16 MiB BSON document limit less room for
the document's other fields.  The server refuses a document that outgrows 16 MiB all the same
(``PayloadTooLarge``, nothing written)."""

PURGE_ATTEMPTS = 3
PRUNE_IDLE_ROUNDS = 5


MIN_SERVER = (4, 2)
"""The oldest MongoDB whose updates take aggregation pipelines (every commit needs them)."""


class DuplicateKey(Exception):
    """The server refused an insert/upsert on an existing ``_id`` (the drivers' error mapping
    raises it into the plan)."""


class WriteUnconfirmed(StoreError):
    """The server applied a write but its write concern was not satisfied (it may still be
    rolled back); the drivers' error mapping raises it into the plan."""


class ReplyLost(StoreUnavailable):
    """The connection failed or timed out once the request may have been sent: it may or may
    not have been applied (the drivers' error mapping raises it into the plan; to a caller it
    is a ``StoreUnavailable``)."""


def _field(doc: Any, name: str, what: str) -> Any:
    if not isinstance(doc, dict) or name not in doc:
        raise StoreCorrupted(f"{what} lacks its {name!r} field")
    return doc[name]


def stored_version(doc: Any) -> int | None:
    """The stored version of an execution document; ``None`` when none is stored (no document,
    or a relay-only one)."""
    if doc is None:
        return None
    version = doc.get("version") if isinstance(doc, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise StoreCorrupted(f"the stored version {version!r} of document {doc!r:.80} is unusable")
    return version or None


# -- open -----------------------------------------------------------------------------------------


def open_plan(where: str, written_by: str) -> Plan[None]:
    """Check the server, then read the layout version and create, use or upgrade the layout
    (the shared open flow fed with :class:`MongoOpen`); a newer layout is refused before
    anything is written."""
    check_server((yield rq.build_info()), where)
    yield from open_flow(MongoOpen(where, written_by))


class MongoOpen(MongoLayout):
    """MongoDB's steps of the shared open flow: no lock (a ready layout costs one read);
    creating refuses foreign documents; creating and upgrading create the indexes first, an
    upgrade then backfills the work rows (:func:`backfill_plan`), and the schema record comes
    last, conditional: a new database's is inserted when absent (a racing opener's wins and is
    judged), an upgrade's written while the record still holds the version found."""

    def __init__(self, where: str, written_by: str) -> None:
        super().__init__(where)
        self.written_by = written_by

    def probe(self) -> Plan[Stored]:
        return stored_schema((yield rq.read_schema()), self.where)

    def create(self) -> Plan[None]:
        if (yield rq.any_document(EXECUTIONS)) is not None:
            raise SchemaVersionError(
                f"{self.where}: collection {EXECUTIONS!r} holds documents but the database has "
                f"no harel schema record (collection {META!r}): it was written by another "
                "application or by the reference implementation, which this store cannot read "
                "(see docs/porting.md); use another ?db= or move the data with an export script"
            )
        yield from self._indexes()

    def upgrade(self, version: int) -> Plan[None]:
        yield from self._indexes()
        if version < WORK_ROWS_SINCE:
            yield from backfill_plan(time.time())

    def _indexes(self) -> Plan[None]:
        for collection in (EXECUTIONS, MARKS, WORK):
            check_index_names((yield rq.list_indexes(collection)), collection, self.where)
            yield rq.create_indexes(collection)

    def record(self, found: Stored) -> Plan[None]:
        version = found.version
        if version is None:
            try:
                claimed = yield rq.claim_schema(SCHEMA_VERSION, self.written_by)
            except DuplicateKey:  # another store created it at the same moment
                claimed = yield rq.read_schema()
            stored = stored_schema(claimed if claimed is not None else {}, self.where)
            if self.verdict(stored) != "upgrade":  # ours, or a racing opener's of this layout
                return
            version = int(stored.version or 0)
            if version < WORK_ROWS_SINCE:  # every layout before 4 lacks the work rows
                yield from backfill_plan(time.time())
        yield rq.upgrade_schema(version, SCHEMA_VERSION, self.written_by)


def exists_plan() -> Plan[bool]:
    """Whether the database holds a harel store: its schema record, or else documents in
    ``executions`` (a foreign or reference layout, which opening then reports); reads only,
    so nothing is created (``open_store(url, create=False)``)."""
    if (yield rq.read_schema()) is not None:
        return True
    return (yield rq.any_document(EXECUTIONS)) is not None


def check_server(info: Any, where: str) -> None:
    """Refuse a server older than MongoDB 4.2 (or a look-alike reporting such a version): it
    cannot run update pipelines, which every commit with side writes is."""
    version = info.get("version") if isinstance(info, dict) else None
    numbers = info.get("versionArray") if isinstance(info, dict) else None
    if not isinstance(numbers, (list, tuple)) and isinstance(version, str):
        numbers = [int(part) if part.isdigit() else 0 for part in version.split(".")[:2]]
    if not isinstance(numbers, (list, tuple)) or not all(isinstance(n, int) for n in numbers):
        raise StoreConfigError(
            f"{where}: the server did not report its version ({info!r:.120}); this store needs "
            "MongoDB 4.2 or newer (update pipelines)"
        )
    if tuple(numbers[:2]) < MIN_SERVER:
        raise StoreConfigError(
            f"{where}: the server reports MongoDB {version or numbers}, which has no update "
            "pipelines; this store needs MongoDB 4.2 or newer (servers that only imitate "
            "MongoDB's API and report an older version are refused too)"
        )


def check_index_names(existing: Any, collection: str, where: str) -> None:
    """Refuse an index of ``collection`` with the keys of one of the store's indexes under
    another name, or with one of their names over other keys (creating ours would fail, or
    leave two indexes to maintain)."""
    ours = [spec for spec in INDEXES if spec.collection == collection]
    for index in existing or []:
        name = index.get("name") if isinstance(index, dict) else None
        raw = index.get("key") if isinstance(index, dict) else None
        if not isinstance(name, str) or not isinstance(raw, Mapping) or name == "_id_":
            continue
        keys = tuple((str(k), int(v) if isinstance(v, (int, float)) else v) for k, v in raw.items())
        for spec in ours:
            if (keys == spec.keys) != (name == spec.name):
                raise StoreConfigError(
                    f"{where}: collection {collection!r} has an index {name!r} on "
                    f"{dict(keys)}, but this store's index {spec.name!r} is on "
                    f"{dict(spec.keys)}; drop that index (db.{collection}.dropIndex({name!r})) "
                    "and open the store again"
                )


# -- commit ---------------------------------------------------------------------------------------


def new_token() -> str:
    """A fresh commit token (recognises a commit's own earlier, reply-lost attempt)."""
    return uuid.uuid4().hex


def summary_of(prepared: PreparedCommit, token: str) -> dict[str, Any]:
    """The fields every commit replaces: the version, the receipt of the new version (the
    commit token), the snapshot and the listing row."""
    p = prepared
    return {
        "version": p.new_version,
        receipt_field(p.new_version): token,
        "data": p.document,
        "definition_id": p.definition_id,
        "status": p.status,
        "parent_id": p.parent_id,
        "outcome": p.outcome,
        "active_path": p.active_path,
        "updated_at": p.committed_at,
    }


def stored_emit(seq: int, emit: PreparedEmit) -> dict[str, Any]:
    """One outbox entry as stored in a document's ``outbox`` array (a commit's emit, an
    enqueue's entry)."""
    return {"seq": seq, "target": emit.target_id, "event": emit.event_json}


def write_of(prepared: PreparedCommit, seqs: Sequence[int]) -> CommitWrite:
    """The side data of a commit as stored, given its seqs (increasing; emits first)."""
    p = prepared
    emit_seqs, spawn_seqs = seqs[: len(p.emits)], seqs[len(p.emits) :]
    return CommitWrite(
        outbox=tuple(stored_emit(seq, emit) for seq, emit in zip(emit_seqs, p.emits, strict=True)),
        spawns=tuple(
            {"seq": seq, "child": s.child_id, "root": s.root_path, "context": s.context_json}
            for seq, s in zip(spawn_seqs, p.spawns, strict=True)
        ),
        timer_paths=tuple(op.path for op in p.timers),
        schedules=tuple({"path": op.path, "at": op.fire_at} for op in p.schedules),
        mark=None
        if p.processed_event_id is None
        else {"event": p.processed_event_id, "at": p.committed_at},
        trace=p.trace,
        seq_hi=seqs[-1] if seqs else None,
    )


def utf8_size(text: str) -> int:
    """How many bytes BSON stores for ``text`` (UTF-8), without encoding ASCII text."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def check_commit_size(prepared: PreparedCommit, limit: int = MAX_DOCUMENT_BYTES) -> None:
    """Refuse, before anything is sent, a commit adding more than ``limit`` bytes (UTF-8, as
    BSON stores its strings) of JSON."""
    p = prepared
    size = utf8_size(p.document) + utf8_size(p.trace or "")
    size += sum(utf8_size(e.event_json) for e in p.emits)
    size += sum(utf8_size(s.context_json) for s in p.spawns)
    if size > limit:
        raise PayloadTooLarge(
            f"the commit of execution {show(p.execution_id)} adds {size} bytes of JSON to its "
            f"document; this store's limit is {limit} bytes per commit (MongoDB documents hold "
            "16 MiB): keep large data outside the execution and store a reference"
        )


def reserve_seqs(source: SeqSource, count: int, where: str) -> Plan[list[int]]:
    """``count`` increasing seqs from the process's hybrid clock under the store's writer id
    (see :mod:`harel_store_mongo._seq`).  Sends nothing, except once per store (and once per
    rotation): the writer registration, one ``find_one_and_update`` on ``meta``."""
    sent_at = source.needs_writer()
    if sent_at is not None:
        try:
            try:
                reply = yield rq.register_writer()
            except DuplicateKey:  # a racing first registration created the counter: it exists
                reply = yield rq.register_writer()
        except (DuplicateKey, WriteUnconfirmed) as exc:
            raise StoreUnavailable(
                f"{where}: the writer registration could not be written ({exc}); nothing was "
                "stored: retry"
            ) from None
        source.registered(reply, sent_at, where)
    return source.issue(count)


def commit_plan(
    prepared: PreparedCommit, trace_max: int | None, where: str, seqs: SeqSource
) -> Plan[None]:
    """Write ``prepared`` with one write, its token stored as the receipt of the new version
    and its emits' and spawns' seqs issued by ``seqs`` (no request: :func:`reserve_seqs`).
    The work rows it touches are upserted before the write and again after it is stored (one
    request each time; none for a state-only commit): see :mod:`harel_store_mongo._claims`.
    No store-wide document is written.

    The write's filter carries every check (:func:`~harel_store_mongo._requests.commit_filter`):
    an event already recorded, or a fence that no longer holds, writes nothing; so does a
    ``seq_hi`` at or above the commit's first seq (another writer's clock ahead of this
    one's), which the miss's read settles: the seqs are issued again above it and the write
    sent again, so one execution's entries strictly increase in commit order.

    Outcomes: success (stored, once); ``AlreadyProcessed`` (the execution holds the commit's
    dedupe mark, whatever the version: nothing written); ``StoreConflict`` (another commit
    holds the version, or wrote the expected one: nothing written); ``StoreUnavailable`` (the
    request never reached the server or was refused whole: nothing written);
    ``CommitOutcomeUnknown`` (the request may have reached the server and no answer came
    back).  A reply lost on the way back re-sends the very same write once; a re-send (this
    one, or a caller's after ``CommitOutcomeUnknown``) whose write misses reads the receipt:
    the commit's own token there means it is stored, so it succeeds without writing anything
    again (before ``AlreadyProcessed``: its own mark is stored too).
    """
    trace_keep_from(0, trace_max)  # validates trace_max before anything is sent
    check_commit_size(prepared)
    count = len(prepared.emits) + len(prepared.spawns)
    issued: list[int] = (yield from reserve_seqs(seqs, count, where)) if count else []
    touches = work_touches(prepared)
    created = yield from touch_plan(touches)  # before the write: never missing (see _claims)
    p = prepared
    p = p._replace(token=p.token or new_token())
    write = write_of(p, issued) if p.has_side_writes else None
    summary = summary_of(p, p.token)
    first = issued[0] if issued else None
    query = rq.commit_filter(
        p.execution_id, p.expected_version, p.base, p.processed_event_id, first
    )
    reply = yield from _send(p, rq.commit_request(query, summary, write, trace_max))
    for _round in range(MISS_ROUNDS):
        if _applied(reply):
            break
        verdict = yield from _after_miss(p, seqs)
        if verdict is None:  # stored by an earlier attempt of this very commit (a lost reply)
            yield from retouch_plan(touches, f"execution {show(p.execution_id)}")
            return
        if isinstance(verdict, StoreError):
            yield from untouch_plan(created, f"commit of {show(p.execution_id)}")
            raise verdict
        if issued and verdict.seq_hi is not None and verdict.seq_hi >= issued[0]:
            issued = seqs.issue(count, verdict.seq_hi)  # above the execution's own entries
            write = write_of(p, issued)
        query = rq.exact_commit_filter(
            p.execution_id,
            p.expected_version,
            verdict.receipt,
            p.processed_event_id,
            issued[0] if issued else None,
        )
        reply = yield from _send(p, rq.commit_request(query, summary, write, trace_max))
    if not _applied(reply):
        raise StoreUnavailable(
            f"the commit of execution {show(p.execution_id)} kept missing a document that "
            "reads as matching it (racing writers); nothing was written: retry"
        )
    yield from retouch_plan(touches, f"execution {show(p.execution_id)}")
    if write is not None and write.mark is not None:
        yield from move_marks_out(p.execution_id, reply)


MISS_ROUNDS = 2
"""How many times one commit sends its write again under the state a miss read, when that
state says it applies (a moved-mark filter's false positive, a mark pruned meanwhile, a
``seq_hi`` in the way of its seqs); a commit still missing then is refused with
``StoreUnavailable``, nothing written."""


@dataclass(frozen=True, slots=True)
class Retry:
    """A missed commit write that applies after all, per the read that followed: send it again
    under the receipt of the expected version as read (``None`` for an insert), with seqs
    above ``seq_hi`` (the document's, ``None`` when it has none)."""

    receipt: str | None
    seq_hi: int | None


def _unknown(p: PreparedCommit, why: str) -> CommitOutcomeUnknown:
    return CommitOutcomeUnknown(p.execution_id, p.expected_version, why)


def _send(p: PreparedCommit, request: Request) -> Plan[Any]:
    """Send one commit write: its reply (``None``: its filter missed, or a duplicate key).  A
    reply lost on the way back re-sends the very same request once (the receipt tells a landed
    first try); a second loss, or a failure after one, is ``CommitOutcomeUnknown``."""
    lost: StoreUnavailable | None = None
    while True:
        try:
            return (yield request)
        except DuplicateKey:
            return None
        except WriteUnconfirmed as exc:
            raise _unknown(p, str(exc)) from exc
        except ReplyLost as exc:
            if lost is not None:
                raise _unknown(p, f"the re-sent request's reply was lost too: {exc}") from exc
            lost = exc  # it may have landed: re-send it
        except StoreUnavailable as exc:
            if lost is not None:
                raise _unknown(p, f"{lost}; the re-send failed: {exc}") from exc
            raise  # the request never reached the server (or was refused whole)


def _after_miss(p: PreparedCommit, seqs: SeqSource) -> Plan[StoreError | Retry | None]:
    """Why a commit's write missed, read once (from the primary), in the contract's order:
    ``None`` when it is already stored (a re-send: its token is the receipt of the new
    version), else :class:`AlreadyProcessed` when the execution holds the mark (in the
    document, or moved out: one read of ``marks``), else ``StoreConflict`` when the version or
    the fence does not hold; when everything holds (the moved-mark filter gave a false
    positive, the mark was pruned meanwhile, or the document's ``seq_hi`` was in the way of
    the commit's seqs) how to send the write again."""
    try:
        doc = yield rq.probe_commit(
            p.execution_id, p.new_version, p.expected_version, p.processed_event_id
        )
    except StoreUnavailable as exc:  # a re-send's miss may be its stored first attempt
        raise _unknown(p, f"the CAS missed and the stored receipt cannot be read: {exc}") from exc
    if doc is not None:
        seqs.observe([doc])
    found = stored_version(doc)
    receipt = _receipt(doc, p.new_version) if found is not None else None
    if resent_and_stored(p, found, receipt):
        return None
    marked = False
    if p.processed_event_id is not None and found is not None:
        marked = bool(doc.get("processed"))
        if not marked and doc.get("marks_out") is True:
            moved = yield rq.moved_mark(p.execution_id, p.processed_event_id)
            marked = moved is not None
    holds = _receipt(doc, p.expected_version) if found else None
    decision = cas_decision(p.expected_version, found)
    if marked or decision == "conflict" or (decision == "update" and not base_holds(p, holds)):
        return refuse_lost(p, found, receipt, marked)
    seq_hi = doc.get("seq_hi") if isinstance(doc, dict) else None
    return Retry(holds, seq_hi if type(seq_hi) is int and seq_hi >= 0 else None)


def _receipt(doc: dict[str, Any], version: int) -> str | None:
    """The stored receipt (commit token) of ``version`` (``None``: none, or unreadable)."""
    receipt = doc.get(receipt_field(version))
    return receipt if isinstance(receipt, str) else None


def _applied(reply: Any) -> bool:
    """Whether a commit's write matched (``update_one``'s result or
    ``find_one_and_update``'s document; ``None``: the CAS missed)."""
    if reply is None:
        return False
    if isinstance(reply, dict):
        return True
    return bool(reply.matched_count == 1 or reply.upserted_id is not None)


def move_marks_out(execution_id: str, reply: Any) -> Plan[None]:
    """After a marked commit left more than :data:`MARKS_HIGH` marks in its document: copy all
    but the latest :data:`MARKS_KEPT` to ``marks``, then drop them from the document with one
    update that also writes the moved-mark filter holding them (:mod:`harel_store_mongo._moved`).

    A mark is in the document, in ``marks`` or (between the two writes) in both, never in
    neither, and a mark that left the document is in its filter (the drop applies only while
    the filter is the one read).  The commit is stored already: a failure here is logged and
    the next marked commit moves them.
    """
    count = reply.get("marks_n") if isinstance(reply, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count <= MARKS_HIGH:
        return
    try:
        doc = (yield rq.oldest_marks(execution_id, count - MARKS_KEPT)) or {}
        marks = [
            m
            for m in doc.get("processed") or []
            if isinstance(m, dict) and isinstance(m.get("event"), str) and "at" in m
        ]
        if not marks:
            return
        with contextlib.suppress(DuplicateKey):  # an earlier, interrupted move copied some
            yield rq.copy_marks(execution_id, marks)  # (unordered: the others went in)
        events = [m["event"] for m in marks]
        moved = yield from moved_filter(execution_id, doc, events)
        yield rq.drop_copied_marks(execution_id, events, moved, doc.get("mf_gen"))
    except StoreError as exc:
        log.warning("moving old marks of %r out failed (retried later): %s", execution_id, exc)


def moved_filter(
    execution_id: str, doc: dict[str, Any], events: Sequence[str]
) -> Plan[MovedFilter]:
    """The moved-mark filter a move writes: the one read (``doc``) with ``events`` added; a
    fresh one when nothing was moved out before; rebuilt from ``marks`` (one read, the marks
    just copied included) when the document has none this release can extend (written before
    layout 5) or it would hold more than :data:`~harel_store_mongo._moved.REBUILD_AT` marks and
    twice what its last rebuild counted (pruned marks leave it)."""
    bits, entered, live = doc.get("mf"), doc.get("mf_n"), doc.get("mf_live")
    if doc.get("marks_out") is not True:  # nothing moved out yet (copies are still inside)
        return MovedFilter(with_marks(None, events), len(events), len(events))
    if (
        usable(bits)
        and _count(entered)
        and _count(live)
        and entered + len(events) < max(REBUILD_AT, 2 * live)
    ):
        return MovedFilter(with_marks(bits, events), entered + len(events), live)
    held = set(events)
    for mark in (yield rq.moved_marks_of(execution_id)) or []:
        key = mark.get("_id") if isinstance(mark, dict) else None
        if isinstance(key, dict) and isinstance(key.get("ev"), str):
            held.add(key["ev"])
    return MovedFilter(with_marks(None, held), len(held), len(held))


def _count(value: Any) -> TypeGuard[int]:
    return type(value) is int and value >= 0


# -- enqueue --------------------------------------------------------------------------------------


def enqueue_plan(prepared: PreparedEnqueue, where: str, seqs: SeqSource) -> Plan[int]:
    """Write one outbox entry targeted at ``prepared.target_id`` and return its seq: the seq
    issued by ``seqs`` as a commit's emits get theirs (no request), then ONE unconditional
    upsert appending the entry to the target's own document (a relay-only one when nothing is
    stored; the target is never read), the target's work row touched before that write and
    again after it, as a commit touches an emit target's (see :mod:`harel_store_mongo._claims`):
    3 requests, like a commit that emits.

    A failure before the write leaves nothing but an early row (harmless); a
    ``StoreUnavailable`` from the write itself (a lost reply, an unconfirmed write concern)
    leaves the entry possibly stored: the caller re-sends (the target's dedupe mark makes a
    second entry for the same event harmless).
    """
    (seq,) = yield from reserve_seqs(seqs, 1, where)
    touches = [prepared.touch]
    yield from touch_plan(touches)  # before the write: a row is never missing (see _claims)
    request = rq.append_outbox_request(prepared.target_id, [stored_emit(seq, prepared.emit)])
    try:
        try:
            yield request
        except DuplicateKey:  # a racing upsert created the document first: it exists now
            yield request
    except (DuplicateKey, WriteUnconfirmed) as exc:
        raise StoreUnavailable(
            f"the enqueue to {show(prepared.target_id)} (seq {seq}) may or may not be stored "
            f"({exc}): re-send it"
        ) from None
    yield from retouch_plan(touches, f"the enqueue to {show(prepared.target_id)}")
    return seq


# -- work rows: the touches of commits and imports, the layout-4 backfill ----------------------


def touch_plan(changes: Sequence[WorkTouch]) -> Plan[list[WorkTouch]]:
    """Apply ``changes`` in one request (none when empty); returns the changes whose rows that
    request inserted (the reply's upserted ids).  A failure is ``StoreUnavailable`` (or the
    driver's typed error): rows touched so far are early, which is harmless."""
    if not changes:
        return []
    try:
        try:
            reply = yield rq.touch_request(changes)
        except DuplicateKey:  # racing upserts inserted a row first: it exists now; touches
            reply = yield rq.touch_request(changes)  # only lower: applying them again is harmless
    except (DuplicateKey, WriteUnconfirmed) as exc:
        keys = [change.key for change in changes]
        raise StoreUnavailable(
            f"the work rows of {keys!r:.200} could not be written ({exc}); nothing of the "
            "write that needed them was stored: retry"
        ) from None
    return created_rows(changes, reply)


def created_rows(changes: Sequence[WorkTouch], reply: Any) -> list[WorkTouch]:
    """The changes whose rows a touch request inserted, read from its reply (an
    ``UpdateResult``'s ``upserted_id``, a ``BulkWriteResult``'s ``upserted_ids``)."""
    if len(changes) == 1:
        return list(changes) if getattr(reply, "upserted_id", None) is not None else []
    upserted = getattr(reply, "upserted_ids", None)
    if not isinstance(upserted, Mapping):
        return []
    return [change for index, change in enumerate(changes) if index in upserted]


def untouch_plan(created: Sequence[WorkTouch], what: str) -> Plan[None]:
    """After a refused commit (nothing of it written): delete the work rows its touch
    inserted, each only while it is exactly as inserted (free, its ``ready_at``, touched once),
    so a row another writer touched, a claim leased or a repair re-dated stays.  Rows that
    existed keep their earlier ``ready_at`` (early: harmless, the next claim repairs them).
    A failure is logged, never raised."""
    if not created:
        return
    try:
        yield rq.drop_fresh_work(created)
    except StoreError as exc:
        log.warning("dropping the work rows a refused %s inserted failed: %s", what, exc)


def retouch_plan(changes: Sequence[WorkTouch], what: str) -> Plan[None]:
    """The touches once more after a stored write (see :mod:`harel_store_mongo._claims`); a
    failure is logged, never raised: the write is stored and its rows were touched before it."""
    try:
        yield from touch_plan(changes)
    except StoreError as exc:
        log.warning("re-touching the work rows of %s failed (touched before): %s", what, exc)


def backfill_touches(docs: Iterable[dict[str, Any]], now: float) -> list[WorkTouch]:
    """The work rows the stored work needs (upgrading to layout 4): per execution its
    earliest timer (relay work, spawn intents and outbox entries by target, is due at once:
    ``relay_due(now)``); priority 0 (its execution's next commit sets its own)."""
    relay = relay_due(now)
    due: dict[str | None, float] = {}
    for doc in docs:
        if not isinstance(doc.get("_id"), str):
            continue
        mine = math.inf
        timers_next = doc.get("timers_next")
        if isinstance(timers_next, (int, float)) and not isinstance(timers_next, bool):
            mine = float(timers_next)
        if doc.get("spawns_next") is not None:
            mine = min(mine, relay)
        if mine != math.inf and (doc.get("version") or 0) >= 1:
            due[doc["_id"]] = min(due.get(doc["_id"], math.inf), mine)
        for entry in doc.get("outbox") or []:
            target = entry.get("target") if isinstance(entry, dict) else None
            if target is None or isinstance(target, str):
                due[target] = min(due.get(target, math.inf), relay)
    return [WorkTouch(key, at, 0, False) for key, at in due.items()]


BACKFILL_BATCH = 500
"""Work rows per ``bulk_write`` of the layout-4 backfill."""


def backfill_plan(now: float) -> Plan[int]:
    """Write a work row for every group with stored work (one read, then one ``bulk_write``
    per :data:`BACKFILL_BATCH` groups); idempotent, so racing upgraders are harmless.
    Returns how many rows it touched."""
    changes = backfill_touches((yield rq.stored_work()), now)
    for start in range(0, len(changes), BACKFILL_BATCH):
        yield from touch_plan(changes[start : start + BACKFILL_BATCH])
    return len(changes)


# -- single-document writes -----------------------------------------------------------------------


def append_trace_plan(
    execution_id: str, entry: dict[str, Any], trace_max: int | None
) -> Plan[None]:
    """Append one step outside a commit (same index and ring rules).  Unknown execution:
    ``ExecutionNotFound``, nothing written (no document is created)."""
    execution_id = check_id(execution_id)
    body = encode_trace_step(entry, max_document_bytes=MAX_DOCUMENT_BYTES)
    trace_keep_from(0, trace_max)
    result = yield rq.append_trace_request(execution_id, body, trace_max)
    if result.matched_count == 0:
        raise ExecutionNotFound(execution_id)


def delete_timer_plan(execution_id: str, path: str, fire_at: float) -> Plan[None]:
    """Disarm a timer only while it still holds exactly ``fire_at``."""
    execution_id, path, fire_at = check_timer_ref(execution_id, path, fire_at)
    yield rq.delete_timer_request(execution_id, path, fire_at)


def ack_plan(seq: int, *, spawns: bool) -> Plan[None]:
    """Remove one relay entry (unknown seq: nothing happens)."""
    seq = check_seq(seq)
    doc = yield rq.ack_request(seq, spawns=spawns)
    if doc is not None and stored_version(doc) is None and doc.get("outbox_next") is None:
        yield rq.drop_empty_relay([doc["_id"]])


def purge_plan(execution_id: str, force: bool) -> Plan[bool]:
    """Remove the execution with everything in its document in one update, then the outbox
    entries other executions emitted to it, then its work row (and so its lease); returns
    whether the execution was stored."""
    execution_id = check_id(execution_id)
    force = check_flag(force, "force")
    existed = False
    for _ in range(PURGE_ATTEMPTS):
        doc = yield rq.purge_request(execution_id, force)
        if doc is not None:
            existed = True
            if doc.get("outbox_next") is None:
                yield rq.drop_empty_relay([execution_id])
            break
        if force:
            break
        current = yield rq.read_status(execution_id)
        if current is None:
            break
        status = str(current.get("status"))
        if status not in {s.value for s in FINISHED}:
            raise ExecutionActive(execution_id, status)
    else:
        raise StoreUnavailable(
            f"purge({show(execution_id)}) kept racing with commits that finished it; retry"
        )
    yield rq.drop_moved_marks_of(execution_id)
    holders = yield rq.targeting(execution_id)
    if holders:
        ids = [doc["_id"] for doc in holders]
        yield rq.untarget(ids, execution_id)
        relay_only = [doc["_id"] for doc in holders if stored_version(doc) is None]
        if relay_only:
            yield rq.drop_empty_relay(relay_only)
    yield rq.drop_work(execution_id)  # last: until here its units may still be stored
    return existed


def prune_plan(older_than: float, batch_size: int) -> Plan[int]:
    """Drop marks recorded before ``older_than``: each round reads up to ``batch_size``
    documents holding such marks (oldest first, only those marks shipped) and drops at most
    ``batch_size`` marks, one short single-document update each; then the moved-out marks,
    ``batch_size`` per round (one read, one ``delete_many``); returns the count."""
    older_than, batch_size = check_prune(older_than, batch_size)
    total = yield from _prune_documents(older_than, batch_size)
    while True:
        moved = yield rq.aged_moved_marks(older_than, batch_size)
        if not moved:
            return total
        result = yield rq.drop_moved_marks([doc["_id"] for doc in moved], older_than)
        total += result.deleted_count


def _prune_documents(older_than: float, batch_size: int) -> Plan[int]:
    """The marks kept inside the documents (see :func:`prune_plan`)."""
    total = 0
    idle = 0
    while True:
        docs = yield rq.aged_marks(older_than, batch_size)
        if not docs:
            return total
        budget = batch_size
        progressed = False
        for doc in docs:
            events = [m["event"] for m in sorted(doc.get("old") or [], key=_mark_age)][:budget]
            if not events:  # its marks_since named no old mark: recompute it
                yield rq.fix_marks_since(doc["_id"], doc.get("marks_since"))
                progressed = True
                continue
            result = yield rq.drop_marks(doc["_id"], events, older_than)
            if result.matched_count:
                total += len(events)
                budget -= len(events)
                progressed = True
            if budget <= 0:
                break
        idle = 0 if progressed else idle + 1
        if idle >= PRUNE_IDLE_ROUNDS:
            raise StoreUnavailable(
                "prune_processed kept racing with other pruners or commits; retry"
            )


def _mark_age(mark: Any) -> float:
    at = mark.get("at") if isinstance(mark, dict) else None
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        raise StoreCorrupted(f"the dedupe mark {mark!r:.80} has no recorded time")
    return float(at)


# -- reads ----------------------------------------------------------------------------------------


def execution_of(doc: Any, execution_id: str) -> Execution | None:
    """The execution a document holds (``None``: no document, or a relay-only one)."""
    if stored_version(doc) is None:
        return None
    what = f"the stored execution {show(execution_id)}"
    return decode_execution(_field(doc, "data", what), what=what)


def load_plan(execution_id: str, seqs: SeqSource | None = None) -> Plan[Execution | None]:
    """The stored execution (a fresh object) or ``None``; ``seqs`` observes its ``seq_hi``
    (a commit of this copy then orders its entries after the execution's earlier ones without
    a second try, whatever the clocks)."""
    execution_id = check_id(execution_id)
    doc = yield rq.load_request(execution_id)
    if seqs is not None and doc is not None:
        seqs.observe([doc])
    return execution_of(doc, execution_id)


def load_for_event_plan(
    execution_id: str, event_id: str, seqs: SeqSource | None = None
) -> Plan[tuple[Execution | None, bool]]:
    """``(execution, processed)`` in one read; unknown execution: ``(None, False)``
    (``seqs``: as :func:`load_plan`)."""
    execution_id, event_id = check_event_ref(execution_id, event_id)
    doc = yield rq.load_request(execution_id, event_id)
    if seqs is not None and doc is not None:
        seqs.observe([doc])
    exe = execution_of(doc, execution_id)
    if exe is None:
        return None, False
    return exe, (yield from _marked(doc, execution_id, event_id))


def _marked(doc: Any, execution_id: str, event_id: str) -> Plan[bool]:
    """Whether a document read with that mark's projection holds it, or has moved it out."""
    if doc is None:
        return False
    if doc.get("processed"):
        return True
    if doc.get("marks_out") is not True:
        return False
    return (yield rq.moved_mark(execution_id, event_id)) is not None


def is_processed_plan(execution_id: str, event_id: str) -> Plan[bool]:
    """Whether ``execution_id`` recorded ``event_id`` as processed."""
    execution_id, event_id = check_event_ref(execution_id, event_id)
    doc = yield rq.is_processed_request(execution_id, event_id)
    return (yield from _marked(doc, execution_id, event_id))


def outbox_entry(doc: dict[str, Any], raw: dict[str, Any]) -> OutboxEntry:
    seq = raw["seq"]
    return OutboxEntry(seq, raw.get("target"), decode_event(raw["event"], what=f"outbox {seq}"))


def spawn_entry(doc: dict[str, Any], raw: dict[str, Any]) -> SpawnEntry:
    seq = raw["seq"]
    context = decode_payload(raw["context"], what=f"spawn {seq}")
    if not isinstance(context, dict):
        raise StoreCorrupted(f"the context of spawn {seq} is not an object")
    return SpawnEntry(seq, doc["_id"], raw["child"], raw["root"], context)


def relay_entries(
    docs: list[dict[str, Any]], array: str, entry: Callable[[dict[str, Any], dict[str, Any]], E]
) -> list[E]:
    """The entries of ``array`` of every document; an unreadable one is logged and skipped
    (one damaged entry never stops the relay)."""
    entries = []
    for doc in docs:
        for raw in doc.get(array) or []:
            try:
                entries.append(entry(doc, raw))
            except (KeyError, TypeError, StoreCorrupted) as exc:
                log.warning("skipping an unreadable %s entry of %r: %s", array, doc.get("_id"), exc)
    return entries


def pending_outbox_plan(
    limit: int | None, seqs: SeqSource | None = None
) -> Plan[list[OutboxEntry]]:
    """Undelivered events, oldest first (at most ``limit``); ``seqs`` observes what it read."""
    limit = sweep_limit(limit)
    docs = yield rq.pending_request(False, limit)
    if seqs is not None:
        seqs.observe(docs)
    entries = sorted(relay_entries(docs, "outbox", outbox_entry), key=lambda e: e.seq)
    return entries[:limit]


def pending_spawns_plan(limit: int | None, seqs: SeqSource | None = None) -> Plan[list[SpawnEntry]]:
    """Uncreated children, oldest first (at most ``limit``); ``seqs`` observes what it read."""
    limit = sweep_limit(limit)
    docs = yield rq.pending_request(True, limit)
    if seqs is not None:
        seqs.observe(docs)
    entries = sorted(relay_entries(docs, "spawns", spawn_entry), key=lambda e: e.seq)
    return entries[:limit]


def timer_pairs(doc: dict[str, Any]) -> list[tuple[str, float]]:
    """The ``(path, fire_at)`` timers of a document; an unreadable one is logged and skipped
    (one damaged timer never stops the sweep or a claim)."""
    pairs = []
    for raw in doc.get("timers") or []:
        try:
            at = raw["at"]
            if isinstance(at, bool) or not isinstance(at, (int, float)):
                raise TypeError(f"fire_at {at!r} is not a number")
            pairs.append((raw["path"], float(at)))
        except (KeyError, TypeError) as exc:
            log.warning("skipping an unreadable timer of %r: %s", doc.get("_id"), exc)
    return pairs


def due_timers_plan(now: float, limit: int | None) -> Plan[list[DueTimer]]:
    """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
    now = check_now(now)
    limit = sweep_limit(limit)
    docs = yield rq.due_request(now, limit)
    due: list[DueTimer] = [
        (doc["_id"], path, at) for doc in docs for path, at in timer_pairs(doc) if at <= now
    ]
    due.sort(key=lambda timer: (timer[2], timer[0], timer[1]))
    return due if limit is None else due[:limit]


def read_trace_plan(execution_id: str) -> Plan[list[dict[str, Any]]]:
    """The retained trace steps, oldest first; ``trace[j]`` has index
    ``trace_next - len(trace) + j``."""
    execution_id = check_id(execution_id)
    doc = yield rq.read_trace_request(execution_id)
    if stored_version(doc) is None:
        return []
    return ring_steps(doc, f"execution {show(execution_id)}")


def ring_steps(doc: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """The steps of a document's trace ring with their indices: ``trace[j]`` has index
    ``trace_next - len(trace) + j``."""
    ring = doc.get("trace") or []
    written = doc.get("trace_next") or 0
    what = f"a trace step of {what}"
    if isinstance(written, bool) or not isinstance(written, int) or written < len(ring):
        raise StoreCorrupted(f"{what}: the step count {written!r} is unreadable")
    first = written - len(ring)
    return [decode_trace_step(body, first + j, what=what) for j, body in enumerate(ring)]


def listing_plan(query: ListingQuery) -> Plan[ExecutionPage]:
    """One page ordered by id, read from the summary fields (keyset cursor)."""
    if query.matches_nothing:
        return ExecutionPage()
    docs = yield rq.listing_request(
        query.status_values, query.definition_id, query.roots_only, query.after, query.probe_limit
    )
    return page_from_probe(query, [summary_from(doc) for doc in docs])


def summary_from(doc: Any) -> ExecutionSummary:
    """An :class:`ExecutionSummary` from a listed document's summary fields."""
    execution_id = doc.get("_id") if isinstance(doc, dict) else None
    try:
        if not isinstance(execution_id, str):
            raise TypeError("the id is not a str")
        return ExecutionSummary(
            id=execution_id,
            definition_id=doc["definition_id"],
            status=Status(doc["status"]),
            outcome=doc.get("outcome"),
            active_path=doc.get("active_path"),
            version=doc["version"],
            parent_id=doc.get("parent_id"),
            updated_at=doc.get("updated_at"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreCorrupted(
            f"the listing summary of execution {execution_id!r:.80} cannot be read: {exc}"
        ) from exc
