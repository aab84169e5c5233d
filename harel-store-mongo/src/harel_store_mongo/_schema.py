"""The document layout (schema version 1), its indexes, and the pure schema decision.

One database (``?db=``, default ``harel``) holds two collections.

``executions`` — one document per execution; everything one commit writes is in it, so a
commit is ONE single-document update (atomic on a standalone server, no replica set)::

    _id            execution id (str)
    version        the CAS token (int >= 1); 0 marks a relay-only document (below)
    token          random token of the last commit (tells a lost reply from a lost CAS)
    data           the Execution as JSON text (shared codec); only load reads it
    definition_id, status, parent_id, outcome, active_path, updated_at
                   the listing summary, set by every commit (listing never reads ``data``)
    outbox         [{seq, target, event}]   pending events it emitted (event: JSON text)
    outbox_next    min(outbox.seq) or null  (the relay sweep's index key)
    spawns         [{seq, child, root, context}]   pending child creations (context: JSON)
    spawns_next    min(spawns.seq) or null
    timers         [{path, at}]             armed timers
    timers_next    min(timers.at) or null   (the due-timer sweep's index key)
    processed      [{event, at}]            dedupe marks, ``at`` = the commit's time
    marks_since    min(processed.at) or null (prune_processed's index key)
    trace          [step JSON, ...]         the ring: the last ``trace_max`` steps
    trace_next     steps ever written; the index of ``trace[j]`` is
                   ``trace_next - len(trace) + j`` (contiguous, no per-step counter)

Field names never come from user data (ids, paths and event ids are values), so ids holding
``.``, ``$`` or anything else cannot address another field.

``purge`` deletes the document, except when it still holds outbox entries this execution
emitted to others or broadcast (those belong to their targets): then it keeps a *relay-only*
document ``{_id, version: 0, outbox, outbox_next}``, deleted with its last ack.  Every read of
an execution ignores ``version`` 0, and a new execution with that id simply takes it over.

``meta`` — ``{_id: "schema", version}`` and ``{_id: "seq", n}``, the one counter outbox and
spawn seqs are allocated from (one block per emitting commit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.errors import SchemaVersionError

SCHEMA_VERSION = 1
"""The layout version this release reads and writes."""

EXECUTIONS = "executions"
META = "meta"
SCHEMA_ID = "schema"
SEQ_ID = "seq"

NUMBER = {"$type": "number"}
"""Partial-index filter (and query clause) of the scalar sweep keys: null is not indexed."""
PRESENT = {"$exists": True}
"""Partial-index filter (and query clause) of the multikey relay lookups: an empty array or a
missing field is not indexed."""


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """One index of ``executions``: keys in order, and an optional partial filter."""

    name: str
    keys: tuple[tuple[str, int], ...]
    partial: dict[str, Any] | None = field(default=None)

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
    IndexSpec("list_status", (("status", 1), ("_id", 1))),
    IndexSpec("list_parent", (("parent_id", 1), ("_id", 1))),
)
"""Every secondary index of ``executions`` (created at open; creating an existing one is a
no-op).  The partial ones hold only documents with something pending, so an idle execution
costs them nothing."""


def index_named(name: str) -> IndexSpec:
    """The :data:`INDEXES` entry called ``name``."""
    for spec in INDEXES:
        if spec.name == name:
            return spec
    raise KeyError(name)


def check_schema(found: Any, where: str) -> None:
    """Accept the stored layout version or raise :class:`SchemaVersionError`.

    ``found`` is the ``meta`` schema document after the open's upsert (``None`` only if the
    server returned nothing, which is treated as damage).
    """
    version = found.get("version") if isinstance(found, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        raise SchemaVersionError(
            f"{where}: the schema record of collection {META!r} is unreadable ({found!r}); "
            "is another application using this database? Use another ?db="
        )
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} holds layout version {version}, written by a newer harel-store-mongo; "
            f"this release reads version {SCHEMA_VERSION}: upgrade harel-store-mongo"
        )
    if version < SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} holds layout version {version}, older than this release's "
            f"{SCHEMA_VERSION}, and no migration exists: use a new database (?db=)"
        )
