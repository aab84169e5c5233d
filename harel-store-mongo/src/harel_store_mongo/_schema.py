"""The document layout (schema version 5), its indexes, and the pure schema decision.

One database (``?db=``, default ``harel``) holds four collections.

``executions`` — one document per execution; everything one commit writes is in it, so a
commit is ONE single-document update (atomic on a standalone server, no replica set)::

    _id            execution id (str)
    version        the CAS token (int >= 1); 0 marks a relay-only document (below)
    r0 .. r7       receipts: ``r<v % 8>`` holds the commit token that wrote version ``v``,
                   so the tokens of the last 8 versions are kept (a re-sent or reply-lost
                   commit is recognised even after rival commits)
    data           the Execution as JSON text (shared codec); only load reads it
    definition_id, status, parent_id, outcome, active_path, updated_at
                   the listing summary, set by every commit (listing never reads ``data``)
    outbox         [{seq, target, event}]   pending events it emitted (event: JSON text)
    outbox_next    min(outbox.seq) or null  (the relay sweep's index key)
    spawns         [{seq, child, root, context}]   pending child creations (context: JSON)
    spawns_next    min(spawns.seq) or null
    seq_hi         the highest seq its commits wrote (outbox and spawns, acked or not): a
                   commit's seqs must be above it (:mod:`harel_store_mongo._seq`); kept by
                   ``purge`` in a relay-only document
    timers         [{path, at}]             armed timers
    timers_next    min(timers.at) or null   (the due-timer sweep's index key)
    processed      [{event, at}]            the latest dedupe marks, ``at`` = the commit's time
    marks_n        len(processed)           (tells the commit when to move marks out)
    marks_since    min(processed.at) or null (prune_processed's index key)
    marks_out      true once older marks were moved to ``marks`` (reads then look there too)
    mf             the moved-mark filter: a Bloom filter (hex digits) of every mark moved out
                   (:mod:`harel_store_mongo._moved`), so a commit's filter sees moved marks
    mf_n, mf_live  marks entered into ``mf`` since its last rebuild / counted by that rebuild
    mf_gen         how many times ``mf`` was written (a move writes it only while unchanged)
    trace          [step JSON, ...]         the ring: the last ``trace_max`` steps
    trace_next     steps ever written; the index of ``trace[j]`` is
                   ``trace_next - len(trace) + j`` (contiguous, no per-step counter)

Field names never come from user data (ids, paths and event ids are values), so ids holding
``.``, ``$`` or anything else cannot address another field.

``purge`` deletes the document, except when it still holds outbox entries this execution
emitted to others or broadcast (those belong to their targets): then it keeps a *relay-only*
document ``{_id, version: 0, outbox, outbox_next}``, deleted with its last ack.  Every read of
an execution ignores ``version`` 0, and a new execution with that id simply takes it over.

``marks`` — dedupe marks moved out of an execution document: ``{_id: {e: execution id, ev:
event id}, e, at}``.  A commit whose document then holds more than :data:`MARKS_HIGH` marks
copies its oldest marks here (idempotent inserts) and only then drops them from the document
(one update, which also sets ``marks_out``), so the document holds at most ``MARKS_HIGH`` marks
plus the few a concurrent writer adds meanwhile, and a mark is always in at least one of
the two places until ``prune_processed`` or ``purge`` removes it.

``work`` — one *work row* per group of due work (claims, see :mod:`harel_store_mongo._claims`):
``{_id: group, priority, ready_at, owner, tn}``, ``_id`` the execution id or ``""`` for the
untargeted outbox entries (no execution id is empty), ``owner`` null on a free row, ``tn`` a
counter every touch increments (a claim's repair only applies to the row it read).  Index
``{priority: 1, ready_at: 1, _id: 1}``: "ready rows of one priority, oldest first".

``meta`` — ``{_id: "schema", version, written_by}`` (the layout version and the release that
wrote it, e.g. ``"harel-store-mongo 0.1.0"``) and ``{_id: "writers", n}``, the count of writer
registrations (:mod:`harel_store_mongo._seq`: a store registers once before its first seq, and
again every 10 minutes of use — no commit otherwise writes ``meta``).  Layouts before 5 kept
``{_id: "seq", n}``, a counter every emitting commit incremented (one hot document); layout 5
leaves it as it is and never reads it (every new seq is above it).

Layout versions: 1 (the first releases) lacked the ``list_definition_id`` index and the
``written_by`` field; 2 kept one ``token`` (of the last commit only) instead of the receipts
and every dedupe mark inside the document.  Opening either creates the missing indexes (the
``marks`` collection's too), then records version 3 with one update guarded by the version
found (idempotent; several processes opening at once all create the same indexes, one records
the version).  Documents need no rewrite: a layout-2 document simply has no receipts yet (its
first commit under layout 3 writes one) and no ``marks_n`` (counted as 0 until its next marked
commit recomputes it).  Layout 3 lacked the ``work`` collection: opening creates its index and
backfills a row per group with work stored (timers, spawn intents, pending outbox entries) before
recording version 4.  The schema record is written last, after the indexes (and the backfill),
so a store that says version 4 has every index and work row of version 4.  Layout 5 added the
moved-mark filter (``mf``), which every writer must keep, and seqs without the counter
(``seq_hi``, the writer registrations): a layout-4 release moves marks out without the filter
and takes seqs from the old counter (small numbers, ordered before every new seq), so it must
not keep writing after the upgrade (opening refuses the newer layout).  The upgrade writes
nothing but the version: pending entries keep their counter seqs (below every new one, so they
stay first), a document without ``seq_hi`` lets any seq in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.author import RECEIPT_WINDOW, OpenSteps, SchemaVerdict, Stored, receipt_slot
from harel.store.errors import SchemaVersionError

SCHEMA_VERSION = 5
"""The layout version this release reads and writes."""
UPGRADES = frozenset({1, 2, 3, 4})
"""The older layout versions opening upgrades in place (-> 2: the ``list_definition_id``
index; -> 3: receipts and the ``marks`` collection with its indexes; -> 4: the ``work``
collection, its index and the backfilled work rows; -> 5: the moved-mark filter and the seqs
without a counter, which need no rewrite: a document that moved marks out before has no
filter, so its marked commits read ``marks`` until its next move builds one, and a document
without ``seq_hi`` takes any seq — every new seq is above the old counter's)."""
WORK_ROWS_SINCE = 4
"""The first layout with work rows (upgrading an older one backfills them)."""
DISTRIBUTION = "harel-store-mongo"

EXECUTIONS = "executions"
MARKS = "marks"
WORK = "work"
META = "meta"
SCHEMA_ID = "schema"
SEQ_ID = "seq"
"""The counter of layouts before 5 (left untouched; nothing reads it)."""
WRITERS_ID = "writers"
"""The writer registrations' counter (:mod:`harel_store_mongo._seq`)."""
UNTARGETED = ""
"""The ``_id`` of the untargeted group's work row (``check_id`` refuses the empty id)."""

RECEIPT_FIELDS = tuple(f"r{slot}" for slot in range(RECEIPT_WINDOW))
"""The receipt ring's fields: ``r<receipt_slot(version)>`` holds the token of ``version``."""

MARKS_KEPT = 64
"""How many of the latest dedupe marks a document keeps after moving older ones out."""
MARKS_HIGH = 128
"""A marked commit that leaves more marks than this in its document moves all but the latest
:data:`MARKS_KEPT` to the ``marks`` collection (so that happens once every 64 marks; a document
is rewritten whole by every update, so a small ring keeps commits cheap)."""


def receipt_field(version: int) -> str:
    """The field holding the receipt (commit token) of ``version``."""
    return RECEIPT_FIELDS[receipt_slot(version)]


NUMBER = {"$type": "number"}
"""Partial-index filter (and query clause) of the scalar sweep keys: null is not indexed."""
PRESENT = {"$exists": True}
"""Partial-index filter (and query clause) of the multikey relay lookups: an empty array or a
missing field is not indexed."""


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index: keys in order, an optional partial filter, and its collection."""

    name: str
    keys: tuple[tuple[str, int], ...]
    partial: dict[str, Any] | None = field(default=None)
    collection: str = EXECUTIONS

    def as_command(self) -> dict[str, Any]:
        """The index as the ``createIndexes`` command describes it."""
        spec: dict[str, Any] = {"key": dict(self.keys), "name": self.name}
        if self.partial is not None:
            spec["partialFilterExpression"] = self.partial
        return spec


INDEXES: tuple[IndexSpec, ...] = (
    # the relays: oldest pending first (scalar min per document), ack by seq, purge by target
    IndexSpec("outbox_next", (("outbox_next", 1),), {"outbox_next": NUMBER}),
    IndexSpec("outbox_seq", (("outbox.seq", 1),), {"outbox.seq": PRESENT}),
    IndexSpec("outbox_target", (("outbox.target", 1),), {"outbox.target": PRESENT}),
    IndexSpec("spawns_next", (("spawns_next", 1),), {"spawns_next": NUMBER}),
    IndexSpec("spawns_seq", (("spawns.seq", 1),), {"spawns.seq": PRESENT}),
    # the due-timer sweep: documents by their earliest timer, ties by id
    IndexSpec("timers_next", (("timers_next", 1), ("_id", 1)), {"timers_next": NUMBER}),
    # prune_processed: documents holding a mark older than the window
    IndexSpec("marks_since", (("marks_since", 1),), {"marks_since": NUMBER}),
    # listing: keyset pages by id under the usual filters
    IndexSpec("list_definition", (("definition_id", 1), ("status", 1), ("_id", 1))),
    # since layout 2: listing one definition under any status (the index above, its status
    # unconstrained, cannot give the _id order: the server sorted every match in memory)
    IndexSpec("list_definition_id", (("definition_id", 1), ("_id", 1))),
    IndexSpec("list_status", (("status", 1), ("_id", 1))),
    IndexSpec("list_parent", (("parent_id", 1), ("_id", 1))),
    # since layout 3: the marks moved out of their documents, by execution and by age
    IndexSpec("marks_execution", (("e", 1),), collection=MARKS),
    IndexSpec("marks_at", (("at", 1),), collection=MARKS),
    # since layout 4: claims read the ready work rows of one priority, oldest first (ties by
    # id, so a bounded read takes the same rows as the reference store's)
    IndexSpec("work_ready", (("priority", 1), ("ready_at", 1), ("_id", 1)), collection=WORK),
)
"""Every secondary index of ``executions``, ``marks`` and ``work`` (created when opening creates or
upgrades the layout; creating an existing one is a no-op).  The partial ones hold only
documents with something pending, so an idle execution costs them nothing."""


def index_named(name: str) -> IndexSpec:
    """The :data:`INDEXES` entry called ``name``."""
    for spec in INDEXES:
        if spec.name == name:
            return spec
    raise KeyError(name)


class MongoLayout(OpenSteps):
    """The layout versions of the shared open flow (the steps are
    :class:`harel_store_mongo._operations.MongoOpen`'s): :data:`SCHEMA_VERSION`,
    :data:`UPGRADES`."""

    current = SCHEMA_VERSION
    upgrades = UPGRADES
    distribution = DISTRIBUTION

    def __init__(self, where: str) -> None:
        self.where = where


def stored_schema(found: Any, where: str) -> Stored:
    """The ``meta`` schema document as the open flow reads it (``None``: an empty database);
    an unreadable record raises :class:`SchemaVersionError`."""
    if found is None:
        return Stored()
    version = found.get("version") if isinstance(found, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        raise SchemaVersionError(
            f"{where}: the schema record of collection {META!r} is unreadable ({found!r:.200}); "
            "is another application using this database? Use another ?db="
        )
    written_by = found.get("written_by")
    return Stored(version, written_by if isinstance(written_by, str) else None)


def schema_decision(found: Any, where: str) -> SchemaVerdict:
    """What opening needs, given the ``meta`` schema document (``None``: an empty database).

    ``"create"``, ``"ready"`` or ``"upgrade"``; a layout this release cannot read (newer, or
    older than :data:`UPGRADES`) raises :class:`SchemaVersionError` naming both versions, the
    release that wrote it and the ``pip install`` line, and so does an unreadable record.
    """
    return MongoLayout(where).verdict(stored_schema(found, where))
