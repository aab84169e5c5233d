"""The SQLite schema: tables, indexes and the schema-version row, as plain SQL text.

Version 1 of the layout:

* ``executions`` — one row per execution: the JSON document plus the summary columns that
  ``commit`` writes (``definition_id``, ``status``, ``outcome``, ``active_path``, ``parent_id``)
  and the CAS ``version``.  Listing is served from the ``executions_*`` indexes.
* ``outbox`` / ``spawns`` — relay queues keyed by an increasing ``seq`` (AUTOINCREMENT, so a
  seq is never reused even after the newest row was acknowledged).
* ``processed_events`` — the dedupe ledger, keyed by ``(execution_id, event_id)``.
* ``timers`` — one armed timer per ``(execution_id, path)``; ``timers_due`` serves sweeps.
  ``fire_at`` (REAL) orders and compares; ``fire_at_repr`` (Python's ``repr``) is what reads
  return, because SQLite stores ``-0.0`` as ``0`` and the contract wants the bits back.
* ``trace`` — the per-execution ring of steps, keyed by ``(execution_id, idx)``.
* ``harel_schema`` — exactly one row holding :data:`SCHEMA_VERSION`, checked at every open.
"""

from __future__ import annotations

from harel.store.errors import SchemaVersionError

SCHEMA_VERSION = 1
"""The layout version this release reads and writes."""

SCHEMA_TABLE = "harel_schema"

TABLES_PROBE = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('harel_schema', 'executions')"
)
"""Which of the marker tables exist (tells a fresh file from a foreign or older layout)."""

VERSION_PROBE = "SELECT version FROM harel_schema WHERE singleton = 1"

RECORD_VERSION = "INSERT INTO harel_schema (singleton, version) VALUES (1, ?)"

DDL: tuple[str, ...] = (
    """CREATE TABLE harel_schema (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        version INTEGER NOT NULL
    )""",
    """CREATE TABLE executions (
        id TEXT PRIMARY KEY,
        definition_id TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome TEXT,
        active_path TEXT,
        parent_id TEXT,
        version INTEGER NOT NULL,
        data TEXT NOT NULL
    )""",
    # definition + status(es): the dashboard query; ordered by id inside one status.
    "CREATE INDEX executions_definition_status ON executions (definition_id, status, id)",
    # definition alone, ordered by id.
    "CREATE INDEX executions_definition ON executions (definition_id, id)",
    # status alone, ordered by id inside one status.
    "CREATE INDEX executions_status ON executions (status, id)",
    # roots only: a partial index holding just the executions without a parent.
    "CREATE INDEX executions_roots ON executions (id) WHERE parent_id IS NULL",
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        target_id TEXT,
        event TEXT NOT NULL
    )""",
    """CREATE TABLE processed_events (
        execution_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (execution_id, event_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE timers (
        execution_id TEXT NOT NULL,
        path TEXT NOT NULL,
        fire_at REAL NOT NULL,
        fire_at_repr TEXT NOT NULL,
        PRIMARY KEY (execution_id, path)
    ) WITHOUT ROWID""",
    "CREATE INDEX timers_due ON timers (fire_at, execution_id, path, fire_at_repr)",
    """CREATE TABLE spawns (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        parent_id TEXT NOT NULL,
        child_id TEXT NOT NULL,
        root_path TEXT NOT NULL,
        context TEXT NOT NULL
    )""",
    """CREATE TABLE trace (
        execution_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (execution_id, idx)
    ) WITHOUT ROWID""",
)
"""Statements creating schema version :data:`SCHEMA_VERSION` in an empty database."""


def schema_action(tables: set[str], version: int | None, where: str) -> bool:
    """Decide what opening a database needs: ``True`` = create the schema, ``False`` = ready.

    ``tables`` is the result of :data:`TABLES_PROBE`, ``version`` the stored version (``None``
    when ``harel_schema`` is missing or empty).  Raises :class:`SchemaVersionError` for a
    database written by another release or holding foreign tables named like ours.
    """
    if SCHEMA_TABLE in tables:
        if version == SCHEMA_VERSION:
            return False
        raise SchemaVersionError(
            f"{where} holds harel SQLite schema version {version}, but this release of "
            f"harel-store-sqlite reads version {SCHEMA_VERSION}; install the release that wrote "
            "it, or migrate the data into a new file"
        )
    if "executions" in tables:
        raise SchemaVersionError(
            f"{where} has an 'executions' table but no harel_schema row (a foreign database, or "
            "one written by an unversioned release); point the store at a new file"
        )
    return True
