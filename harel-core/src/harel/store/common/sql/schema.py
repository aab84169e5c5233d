"""The SQL family's schema: tables, indexes, the schema-version row and the upgrade path.

Layout version 2 (version 1, the first SQLite release, is upgraded in place):

* ``executions`` — one row per execution: the JSON document (``data``), the summary columns
  that ``commit`` writes (``definition_id``, ``status``, ``outcome``, ``active_path``,
  ``parent_id``, ``updated_at``), the CAS ``version``, and ``commit_token`` (the random token of
  the last commit, written only by single-request dialects, whose side writes are guarded by
  it; ``NULL`` elsewhere).  Listing is served by the ``executions_*`` indexes.
* ``outbox`` / ``spawns`` — relay queues keyed by an increasing ``seq`` (AUTOINCREMENT: a seq
  is never reused, even after the newest row was acknowledged).  ``outbox_target`` and
  ``spawns_parent`` serve ``purge``.
* ``processed_events`` — the dedupe marks, keyed by ``(execution_id, event_id)``, with
  ``processed_at`` (the commit's epoch seconds); ``processed_events_age`` serves
  ``prune_processed``.
* ``timers`` — one armed timer per ``(execution_id, path)``; ``timers_due`` serves sweeps.
  ``fire_at`` (REAL) orders and compares; ``fire_at_repr`` (Python's ``repr``) is what reads
  return, because SQLite stores ``-0.0`` as ``0`` and the contract wants the bits back.
* ``trace`` — the per-execution ring of steps, keyed by ``(execution_id, idx)``.
* ``harel_schema`` — exactly one row holding :data:`SCHEMA_VERSION`, checked at every open.

Every statement here is idempotent (``IF NOT EXISTS``) except the upgrade's ``ALTER TABLE``s,
which run only inside the write transaction that re-checked the version.
"""

from __future__ import annotations

from typing import Literal

from harel.store.errors import SchemaVersionError

SCHEMA_VERSION = 2
"""The layout version this release reads and writes."""

SCHEMA_TABLE = "harel_schema"

TABLES_PROBE = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('harel_schema', 'executions')"
)
"""Which of the marker tables exist (tells a fresh database from a foreign or older layout)."""

VERSION_PROBE = "SELECT version FROM harel_schema WHERE singleton = 1"

RECORD_VERSION = (
    "INSERT INTO harel_schema (singleton, version) VALUES (1, :version) "
    "ON CONFLICT (singleton) DO NOTHING"
)

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS harel_schema (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS executions (
        id TEXT PRIMARY KEY,
        definition_id TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome TEXT,
        active_path TEXT,
        parent_id TEXT,
        version INTEGER NOT NULL,
        data TEXT NOT NULL,
        updated_at REAL,
        commit_token TEXT
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
    *(
        # added by version 2 (also created by the upgrade from version 1)
        "CREATE INDEX IF NOT EXISTS processed_events_age ON processed_events (processed_at)",
        "CREATE INDEX IF NOT EXISTS outbox_target ON outbox (target_id) "
        "WHERE target_id IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS spawns_parent ON spawns (parent_id)",
    ),
)
"""Statements creating schema version :data:`SCHEMA_VERSION` in an empty database."""

UPGRADES: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE executions ADD COLUMN updated_at REAL",
        "ALTER TABLE executions ADD COLUMN commit_token TEXT",
        "ALTER TABLE processed_events ADD COLUMN processed_at REAL",
        # a version-1 mark's age is unknown: count it from the upgrade, so pruning can only
        # drop it later than its real age would allow, never earlier
        "UPDATE processed_events SET processed_at = :now",
        *DDL[-3:],
        "UPDATE harel_schema SET version = 2 WHERE singleton = 1 AND version = 1",
    ),
}
"""For each older version, the statements (run in one write transaction) that bring it to
:data:`SCHEMA_VERSION`.  ``:now`` is bound to the upgrade's epoch seconds."""

SchemaAction = Literal["ready", "create", "upgrade"]


def schema_action(tables: set[str], version: int | None, where: str) -> SchemaAction:
    """Decide what opening a database needs, from :data:`TABLES_PROBE` and the stored version.

    ``"create"`` for an empty database, ``"upgrade"`` for a version listed in
    :data:`UPGRADES`, ``"ready"`` for the current one.  Raises :class:`SchemaVersionError` for
    a database written by a newer (or unknown) release or holding foreign tables named like
    ours; ``where`` names the database in the message.
    """
    if SCHEMA_TABLE in tables:
        if version == SCHEMA_VERSION:
            return "ready"
        if version in UPGRADES:
            return "upgrade"
        raise SchemaVersionError(
            f"{where} holds harel SQL schema version {version}, but this release reads version "
            f"{SCHEMA_VERSION} (and upgrades {', '.join(map(str, sorted(UPGRADES)))}); install "
            "the release that wrote it, or migrate the data into a new database"
        )
    if "executions" in tables:
        raise SchemaVersionError(
            f"{where} has an 'executions' table but no harel_schema row (a foreign database, or "
            "one written by an unversioned release); point the store at a new database"
        )
    return "create"
