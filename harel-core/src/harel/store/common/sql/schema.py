"""The SQL family's schema: tables, indexes, the schema-version row and the upgrade path.

Layout version 5 (versions 1 to 4, written by earlier releases, are upgraded in place):

* ``executions`` — one row per execution: the JSON document (``data``), the summary columns that
  ``commit`` writes (``definition_id``, ``status``, ``outcome``, ``active_path``, ``parent_id``,
  ``updated_at``), the CAS ``version``, ``commit_token`` (the random token of the last commit,
  written only by single-request dialects, whose side writes are guarded by it; ``NULL``
  elsewhere) and, since version 4, the receipt ring ``r0`` .. ``r7`` (:data:`RECEIPT_COLUMNS`):
  column ``r{version % 8}`` holds the commit token (``PreparedCommit.token``) of the commit that
  wrote that version, set by the CAS statement itself, so the last eight versions' writers are
  known and a re-sent commit is recognised (``NULL``: not written since the upgrade, or an
  imported row). Listing is served by the ``executions_*`` indexes: one per filter shape
  (definition + status, definition, status, none) and, since version 3, a roots-only twin of
  each (partial: ``WHERE parent_id IS NULL``), so a roots-only page reads only roots however
  many children share its status or definition.
* ``outbox`` / ``spawns`` — relay queues keyed by an increasing ``seq`` (AUTOINCREMENT: a seq
  is never reused, even after the newest row was acknowledged).  ``outbox_target`` and
  ``spawns_parent`` serve ``purge`` and ``export_execution``.
* ``processed_events`` — the dedupe marks, keyed by ``(execution_id, event_id)``, with
  ``processed_at`` (the commit's epoch seconds); ``processed_events_age`` serves
  ``prune_processed``.
* ``timers`` — one armed timer per ``(execution_id, path)``; ``timers_due`` serves sweeps.
  ``fire_at`` (REAL) orders and compares; ``fire_at_repr`` (Python's ``repr``) is what reads
  return, because SQLite stores ``-0.0`` as ``0`` and the contract wants the bits back.
* ``trace`` — the per-execution ring of steps, keyed by ``(execution_id, idx)``.
* ``work`` (since version 5) — the claims' work rows (:mod:`harel.store.common.claims`), one
  per group: ``key`` (the execution id; ``''`` for the untargeted outbox entries, an id no
  execution can have), ``priority``, ``ready_at`` (a free row's lower bound on its earliest
  due unit, or a lease's expiry) and ``owner`` (``NULL``: free).  ``work_ready`` (``priority,
  ready_at, key``) serves a claim's five bounded tier reads; ``outbox_untargeted`` serves the
  untargeted group's entries by ``seq``.  The upgrade to version 5 backfills a row per
  execution with timers (earliest ``fire_at``), per outbox target and per spawning parent
  (``relay_due`` of the upgrade's time), priority 0 (the execution's own next commit sets
  its priority).
* ``harel_schema`` — exactly one row: ``(singleton, version, written_by)``, the layout version
  and the release that wrote it (``"harel-store-sqlite 0.1.0"``), checked at every open with
  :func:`harel.store.author.schema_verdict`.  These three columns come first in every layout,
  so any release can read them (``SELECT *``) and name the release a newer file needs.

Every statement here is idempotent (``IF NOT EXISTS``) except the upgrades' ``ALTER TABLE``s,
which run only inside the write transaction that re-checked the version (single-request
dialects: one batch, which a concurrent opener's duplicate fails as a whole).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from harel.store.common.claims import relay_due
from harel.store.common.commit import RECEIPT_WINDOW
from harel.store.common.open_flow import OpenSteps, Step, Stored
from harel.store.common.schema_version import release_of
from harel.store.common.sql.requests import Batch, Statement
from harel.store.errors import SchemaVersionError

if TYPE_CHECKING:
    from harel.store.common.sql.plan import SqlPlan

SCHEMA_VERSION = 5
"""The layout version this release reads and writes."""

RECEIPT_COLUMNS: tuple[str, ...] = tuple(f"r{slot}" for slot in range(RECEIPT_WINDOW))
"""The receipt ring's columns, by slot (:func:`~harel.store.author.receipt_slot`): a fixed
set, the only column names a statement ever picks at run time."""

SCHEMA_TABLE = "harel_schema"

TABLES_PROBE = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('harel_schema', 'executions')"
)
"""Which of the marker tables exist (tells a fresh database from a foreign or older layout)."""

VERSION_PROBE = "SELECT * FROM harel_schema WHERE singleton = 1"
"""``(singleton, version[, written_by])``: ``*`` because version 2 has no ``written_by``."""

RECORD_VERSION = (
    "INSERT INTO harel_schema (singleton, version, written_by) VALUES (1, :version, "
    ":written_by) ON CONFLICT (singleton) DO NOTHING"
)

_ADDED_BY_2: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS processed_events_age ON processed_events (processed_at)",
    "CREATE INDEX IF NOT EXISTS outbox_target ON outbox (target_id) WHERE target_id IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS spawns_parent ON spawns (parent_id)",
)

_ADDED_BY_3: tuple[str, ...] = (
    # roots-only listing: without these, a roots-only page filtered by status or definition
    # walked the status/definition index and read every child row in it to skip it
    "CREATE INDEX IF NOT EXISTS executions_roots_definition_status "
    "ON executions (definition_id, status, id) WHERE parent_id IS NULL",
    "CREATE INDEX IF NOT EXISTS executions_roots_definition "
    "ON executions (definition_id, id) WHERE parent_id IS NULL",
    "CREATE INDEX IF NOT EXISTS executions_roots_status "
    "ON executions (status, id) WHERE parent_id IS NULL",
)

_ADDED_BY_5: tuple[str, ...] = (
    # ready_at is NULL only inside a claim's transaction: a row it drops (then deletes)
    """CREATE TABLE IF NOT EXISTS work (
        key TEXT PRIMARY KEY,
        priority INTEGER NOT NULL,
        ready_at REAL,
        owner TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS work_ready ON work (priority, ready_at, key)",
    "CREATE INDEX IF NOT EXISTS outbox_untargeted ON outbox (seq) WHERE target_id IS NULL",
)

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS harel_schema (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        version INTEGER NOT NULL,
        written_by TEXT
    )""",
    f"""CREATE TABLE IF NOT EXISTS executions (
        id TEXT PRIMARY KEY,
        definition_id TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome TEXT,
        active_path TEXT,
        parent_id TEXT,
        version INTEGER NOT NULL,
        data TEXT NOT NULL,
        updated_at REAL,
        commit_token TEXT,
        {", ".join(f"{column} TEXT" for column in RECEIPT_COLUMNS)}
    )""",
    # definition + status(es): the dashboard query; ordered by id inside one status.
    "CREATE INDEX IF NOT EXISTS executions_definition_status "
    "ON executions (definition_id, status, id)",
    # definition alone, ordered by id.
    "CREATE INDEX IF NOT EXISTS executions_definition ON executions (definition_id, id)",
    # status alone, ordered by id inside one status.
    "CREATE INDEX IF NOT EXISTS executions_status ON executions (status, id)",
    # roots only: a partial index holding just the executions without a parent.
    "CREATE INDEX IF NOT EXISTS executions_roots ON executions (id) WHERE parent_id IS NULL",
    """CREATE TABLE IF NOT EXISTS outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        target_id TEXT,
        event TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS processed_events (
        execution_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        processed_at REAL,
        PRIMARY KEY (execution_id, event_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS timers (
        execution_id TEXT NOT NULL,
        path TEXT NOT NULL,
        fire_at REAL NOT NULL,
        fire_at_repr TEXT NOT NULL,
        PRIMARY KEY (execution_id, path)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS timers_due ON timers (fire_at, execution_id, path, fire_at_repr)",
    """CREATE TABLE IF NOT EXISTS spawns (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        parent_id TEXT NOT NULL,
        child_id TEXT NOT NULL,
        root_path TEXT NOT NULL,
        context TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS trace (
        execution_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (execution_id, idx)
    ) WITHOUT ROWID""",
    *_ADDED_BY_2,
    *_ADDED_BY_3,
    *_ADDED_BY_5,
)
"""Statements creating schema version :data:`SCHEMA_VERSION` in an empty database."""

_TO_2: tuple[str, ...] = (
    "ALTER TABLE executions ADD COLUMN updated_at REAL",
    "ALTER TABLE executions ADD COLUMN commit_token TEXT",
    "ALTER TABLE processed_events ADD COLUMN processed_at REAL",
    # a version-1 mark's age is unknown: count it from the upgrade, so pruning can only
    # drop it later than its real age would allow, never earlier
    "UPDATE processed_events SET processed_at = :now",
    *_ADDED_BY_2,
    "UPDATE harel_schema SET version = 2 WHERE singleton = 1 AND version = 1",
)

_TO_3: tuple[str, ...] = (
    "ALTER TABLE harel_schema ADD COLUMN written_by TEXT",
    *_ADDED_BY_3,
    "UPDATE harel_schema SET version = 3, written_by = :written_by "
    "WHERE singleton = 1 AND version = 2",
)

_TO_4: tuple[str, ...] = (
    # ADD COLUMN only edits the schema: no row is rewritten, however many are stored
    *(f"ALTER TABLE executions ADD COLUMN {column} TEXT" for column in RECEIPT_COLUMNS),
    "UPDATE harel_schema SET version = 4, written_by = :written_by "
    "WHERE singleton = 1 AND version = 3",
)

_TO_5: tuple[str, ...] = (
    *_ADDED_BY_5,
    # the backfill, in one statement (no upsert: older engines): a row per execution with
    # timers (the earliest fire_at), per outbox target ('' untargeted) and per spawning parent
    # (relay work: :relay, relay_due of the upgrade's time)
    "INSERT INTO work (key, priority, ready_at, owner) "
    "SELECT key, 0, MIN(ready_at), NULL FROM ("
    "SELECT execution_id AS key, fire_at AS ready_at FROM timers "
    "UNION ALL SELECT COALESCE(target_id, ''), :relay FROM outbox "
    "UNION ALL SELECT parent_id, :relay FROM spawns) GROUP BY key",
    "UPDATE harel_schema SET version = 5, written_by = :written_by "
    "WHERE singleton = 1 AND version = 4",
)

UPGRADES: dict[int, tuple[str, ...]] = {
    1: (*_TO_2, *_TO_3, *_TO_4, *_TO_5),
    2: (*_TO_3, *_TO_4, *_TO_5),
    3: (*_TO_4, *_TO_5),
    4: _TO_5,
}
"""For each older version, the statements (run in one write transaction) that bring it to
:data:`SCHEMA_VERSION`.  ``:now`` is bound to the upgrade's epoch seconds, ``:written_by`` to
the upgrading release, ``:relay`` to :func:`~harel.store.common.claims.relay_due` of
``:now``."""


class SqlOpen(OpenSteps):
    """The SQL family's steps of :func:`~harel.store.author.open_flow`.

    The probe is :data:`TABLES_PROBE` and the ``harel_schema`` row: a ``harel_schema`` table
    without its row, or an ``executions`` table without ``harel_schema`` (a foreign database),
    raises :class:`SchemaVersionError` before anything is written.  An interactive dialect
    locks with ``BEGIN IMMEDIATE`` (a second opener waits, probes again and finds the work
    done) and rolls back on failure; a single-request dialect sends the create or upgrade as
    one ``Batch`` and, when that fails, probes again (a concurrent opener's batch won).
    ``now`` dates the marks of an upgraded database.
    """

    current = SCHEMA_VERSION
    upgrades = UPGRADES

    def __init__(self, plan: SqlPlan, now: float) -> None:
        self.sql, self.now = plan.sql, now
        self.where, self.distribution = plan.where, plan.distribution
        dialect = plan.dialect
        self.single = dialect.single_request
        self.begin, self.commit = Statement(dialect.begin or ""), Statement(dialect.commit)
        self.rollback = Statement(dialect.rollback)

    def probe(self) -> Step[Stored]:
        tables = {str(row[0]) for row in (yield self.sql.tables_probe.bind()).rows}
        if SCHEMA_TABLE not in tables:
            if "executions" in tables:
                raise SchemaVersionError(
                    f"{self.where} has an 'executions' table but no harel_schema row (a foreign "
                    "database, or one written by an unversioned release); point the store at a "
                    "new database"
                )
            return Stored()
        row = (yield self.sql.version_probe.bind()).first
        if row is None:
            raise SchemaVersionError(
                f"{self.where} has a harel_schema table without its row (an interrupted or "
                "foreign database); point the store at a new database"
            )
        written_by = str(row[2]) if len(row) > 2 and row[2] is not None else None
        return Stored(int(row[1]), written_by)

    def lock(self) -> Step[bool]:
        if not self.single:
            yield self.begin
        return not self.single

    def create(self) -> Step[None]:
        written_by = release_of(self.distribution)
        record = self.sql.record_version.bind(version=SCHEMA_VERSION, written_by=written_by)
        yield from self._send((*(s.bind() for s in self.sql.ddl), record))

    def upgrade(self, version: int) -> Step[None]:
        now = self.now
        values = {"now": now, "written_by": release_of(self.distribution), "relay": relay_due(now)}
        yield from self._send(tuple(s.bind_map(values) for s in self.sql.upgrades[version]))

    def _send(self, statements: tuple[Statement, ...]) -> Step[None]:
        if self.single:
            yield Batch(statements)
        else:
            for statement in statements:  # noqa: UP028 - results are sent back: not a tuple's
                yield statement

    def unlock(self) -> Step[None]:
        if not self.single:
            yield self.commit

    def recover(self, error: Exception) -> Step[bool]:
        if self.single:
            return self.verdict((yield from self.probe())) == "ready"
        with contextlib.suppress(Exception):
            yield self.rollback
        return False
