"""Test support shared by the SQL family's backend test suites (the stores never import it).

SQLite, libSQL and rqlite store one layout, so the tests that check it (its creation, the
upgrade of a file written by the previous release, the refusal of a newer one) and the tests
of what a one-connection store guarantees are written once, in
:mod:`harel.store.common.sql.suite`, and collected by each backend's tests with a
:class:`FileBackend` fixture saying how to open its stores.  This module holds their data: the
layouts earlier releases wrote (frozen copies, never derived from the current DDL) and small
helpers.  Raw access uses the stdlib ``sqlite3`` on files no store has open.
"""

# ruff: noqa: S608 - the layouts below are fixed test data composed of fixed fragments

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harel.conformance.harness import StoreHarness
from harel.model import Event, Execution, Status
from harel.store.common.sql.requests import Batch, Result, Statement
from harel.store.contract import AsyncExecutionStore, ExecutionStore, TimerOp

TABLES = ("executions", "outbox", "processed_events", "timers", "spawns", "trace")
"""The data tables of the layout (``harel_schema`` aside)."""

_SCHEMA_TABLE = """
CREATE TABLE harel_schema (singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                           version INTEGER NOT NULL);
"""
_EXECUTIONS = """
CREATE TABLE executions (id TEXT PRIMARY KEY, definition_id TEXT NOT NULL, status TEXT NOT NULL,
    outcome TEXT, active_path TEXT, parent_id TEXT, version INTEGER NOT NULL, data TEXT NOT NULL
    {more});
CREATE INDEX executions_definition_status ON executions (definition_id, status, id);
CREATE INDEX executions_definition ON executions (definition_id, id);
CREATE INDEX executions_status ON executions (status, id);
CREATE INDEX executions_roots ON executions (id) WHERE parent_id IS NULL;
CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT, event TEXT NOT NULL);
CREATE TABLE processed_events (execution_id TEXT NOT NULL, event_id TEXT NOT NULL,
    {processed_at} PRIMARY KEY (execution_id, event_id)) WITHOUT ROWID;
"""
_TIMERS_SPAWNS_TRACE = """
CREATE TABLE timers (execution_id TEXT NOT NULL, path TEXT NOT NULL, fire_at REAL NOT NULL,
    fire_at_repr TEXT NOT NULL, PRIMARY KEY (execution_id, path)) WITHOUT ROWID;
CREATE INDEX timers_due ON timers (fire_at, execution_id, path, fire_at_repr);
CREATE TABLE spawns (seq INTEGER PRIMARY KEY AUTOINCREMENT, parent_id TEXT NOT NULL,
    child_id TEXT NOT NULL, root_path TEXT NOT NULL, context TEXT NOT NULL);
CREATE TABLE trace (execution_id TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL,
    PRIMARY KEY (execution_id, idx)) WITHOUT ROWID;
"""

VERSION_1 = (
    _SCHEMA_TABLE
    + _EXECUTIONS.format(more="", processed_at="")
    + _TIMERS_SPAWNS_TRACE
    + "INSERT INTO harel_schema VALUES (1, 1);"
)
"""The layout written by harel-store-sqlite 0.0 (schema version 1), kept as test data."""

VERSION_2 = (
    _SCHEMA_TABLE
    + _EXECUTIONS.format(
        more=", updated_at REAL, commit_token TEXT", processed_at="processed_at REAL,"
    )
    + _TIMERS_SPAWNS_TRACE
    + """
CREATE INDEX processed_events_age ON processed_events (processed_at);
CREATE INDEX outbox_target ON outbox (target_id) WHERE target_id IS NOT NULL;
CREATE INDEX spawns_parent ON spawns (parent_id);
INSERT INTO harel_schema VALUES (1, 2);
"""
)
"""The layout written by the 0.1 releases of the SQL-family backends (schema version 2)."""

VERSION_3_INDEXES = frozenset(
    {"executions_roots_definition_status", "executions_roots_definition", "executions_roots_status"}
)
"""The indexes version 3 added (roots-only listing)."""

_TO_VERSION_3 = """
ALTER TABLE harel_schema ADD COLUMN written_by TEXT;
CREATE INDEX executions_roots_definition_status ON executions (definition_id, status, id)
    WHERE parent_id IS NULL;
CREATE INDEX executions_roots_definition ON executions (definition_id, id)
    WHERE parent_id IS NULL;
CREATE INDEX executions_roots_status ON executions (status, id) WHERE parent_id IS NULL;
UPDATE harel_schema SET version = 3, written_by = 'harel-store-sqlite 0.2.0';
"""
"""What the 0.2 releases (schema version 3) changed in a version-2 layout, as test data."""

RECEIPT_COLUMNS = tuple(f"r{slot}" for slot in range(8))
"""The receipt ring's columns version 4 added to ``executions`` (as test data)."""


_TO_VERSION_4 = (
    "".join(f"ALTER TABLE executions ADD COLUMN {column} TEXT;\n" for column in RECEIPT_COLUMNS)
    + "UPDATE harel_schema SET version = 4, written_by = 'harel-store-sqlite 0.3.0';\n"
)
"""What the 0.3 releases (schema version 4) changed in a version-3 layout, as test data."""

VERSION_5_INDEXES = frozenset({"work_ready", "outbox_untargeted"})
"""The indexes version 5 added (claims)."""


def version_4_file(path: Path) -> Execution:
    """A version-4 database, as the 0.3 releases left it (no work rows): :func:`version_2_file`'s
    data (timer ``a.b`` at 99.5, an outbox entry targeted at ``old``, a spawn intent of
    ``old``) plus an untargeted outbox entry ``bcast-old`` and two timers of an execution
    ``t2`` (5.0 and 7.0); returns ``old`` as stored."""
    exe = version_3_file(path)
    conn = raw(path)
    try:
        conn.executescript(_TO_VERSION_4)
        event = Event(id="bcast-old", kind="K").model_dump_json()
        conn.execute("INSERT INTO outbox (target_id, event) VALUES (NULL, ?)", (event,))
        conn.execute("INSERT INTO timers VALUES ('t2', 'x', 7.0, '7.0'), ('t2', 'y', 5.0, '5.0')")
    finally:
        conn.close()
    return exe


def execute(conn: sqlite3.Connection, request: Statement | Batch) -> Any:
    """A driver of the plan over a stdlib connection in autocommit: a statement alone (its
    rows and rowcount, and a write's rowid as rqlite reports ``last_insert_id``), a
    :class:`Batch` in one transaction (as rqlite runs it: a list of results, all applied or
    none)."""
    if isinstance(request, Statement):
        cursor = conn.execute(request.sql, request.params)
        rows = cursor.fetchall()
        last_id = cursor.lastrowid if cursor.description is None else None
        return Result(rows, cursor.rowcount, last_id or None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        results = [execute(conn, statement) for statement in request.statements]
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return results


def raw(path: Path) -> sqlite3.Connection:
    """A stdlib connection of its own (autocommit) to ``path`` (no store may have it open
    in this process when the backend is libSQL)."""
    return sqlite3.connect(str(path), isolation_level=None)


def table_counts(path: Path) -> dict[str, int]:
    """How many rows each data table of ``path`` holds."""
    conn = raw(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()


def schema_row(path: Path) -> tuple[Any, ...]:
    """The ``harel_schema`` row of ``path``, every column."""
    conn = raw(path)
    try:
        row: tuple[Any, ...] = conn.execute("SELECT * FROM harel_schema").fetchone()
        return row
    finally:
        conn.close()


def index_names(path: Path) -> set[str]:
    """The names of the indexes ``path`` holds."""
    conn = raw(path)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
        return {str(row[0]) for row in rows}
    finally:
        conn.close()


def column_names(path: Path, table: str) -> list[str]:
    """The columns of ``table`` in ``path``, in order."""
    conn = raw(path)
    try:
        return [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})").fetchall()]
    finally:
        conn.close()


def version_3_file(path: Path) -> Execution:
    """A version-3 database, as the 0.2 releases left it: :func:`version_2_file`'s data in the
    version-3 layout (no receipt columns); returns the execution as stored."""
    exe = version_2_file(path)
    conn = raw(path)
    try:
        conn.executescript(_TO_VERSION_3)
    finally:
        conn.close()
    return exe


def version_2_file(path: Path) -> Execution:
    """A version-2 database, as the previous release left it: one RUNNING root execution
    (version 3) with a dedupe mark, an armed timer, an outbox entry, a spawn intent and two
    trace steps; returns the execution as stored."""
    exe = Execution(id="old", definition_id="d", status=Status.RUNNING, version=3)
    conn = raw(path)
    try:
        conn.executescript(VERSION_2)
        conn.execute(
            "INSERT INTO executions VALUES ('old', 'd', 'RUNNING', NULL, NULL, NULL, 3, ?, 50.0,"
            " NULL)",
            (exe.model_dump_json(),),
        )
        conn.execute("INSERT INTO processed_events VALUES ('old', 'ev-old', 40.0)")
        conn.execute("INSERT INTO timers VALUES ('old', 'a.b', 99.5, '99.5')")
        event = Event(id="out-old", kind="K").model_dump_json()
        conn.execute("INSERT INTO outbox (target_id, event) VALUES ('old', ?)", (event,))
        conn.execute(
            "INSERT INTO spawns (parent_id, child_id, root_path, context) VALUES "
            "('old', 'kid', 'r', '{\"k\": 1}')"
        )
        conn.execute("INSERT INTO trace VALUES ('old', 4, '{\"a\": 1}'), ('old', 5, '{\"a\": 2}')")
    finally:
        conn.close()
    return exe


def full_commit_args(exe: Execution, tag: str) -> tuple[Any, ...]:
    """The arguments of a commit touching every table."""
    return (
        exe,
        [(None, Event(id=f"{tag}-out", kind="Out")), ("t", Event(id=f"{tag}-t", kind="T"))],
        f"{tag}-in",
        (TimerOp.schedule("p", 1.0),),
        ((f"{tag}-child", "r", {"k": tag}),),
        {"event_kind": tag},
    )


@dataclass(frozen=True)
class FileBackend:
    """How the shared suite reaches one file-backed SQL-family backend.

    ``distribution`` is the backend's distribution (named in the layout's ``written_by``),
    ``open(path, **knobs)`` builds the sync store, ``aopen(path, **knobs)`` the async one,
    ``url`` is the store URL of a file (``{path}`` replaced), and ``harness(path)`` builds the
    conformance harness over a file, ``raw(path)`` an autocommit connection of the backend's
    own driver (two SQLite copies in one process do not see each other's locks).
    """

    distribution: str
    open: Callable[..., ExecutionStore]
    aopen: Callable[..., Awaitable[AsyncExecutionStore]]
    url_template: str
    harness: Callable[[Path], StoreHarness]
    raw: Callable[[Path], Any] = raw

    def url(self, path: Path) -> str:
        """The store URL another process opens ``path`` with."""
        return self.url_template.format(path=path)


def file_fixtures(backend: FileBackend) -> tuple[Any, ...]:
    """The fixtures a file-backed backend's ``conftest.py`` binds, in this order:
    ``anyio_backend``, ``harel_harness`` (a fresh file per test, for the conformance kit),
    ``db_path``, ``store`` / ``astore`` (over ``db_path``, closed afterwards) and
    ``sql_backend`` (for :mod:`harel.store.common.sql.suite`)."""
    import pytest  # here: harnesses import this module where pytest may not be installed

    @pytest.fixture
    def anyio_backend() -> str:
        return "asyncio"

    @pytest.fixture
    def harel_harness(tmp_path: Path) -> Iterator[StoreHarness]:
        made = backend.harness(tmp_path / "kit.db")
        yield made
        made.destroy()

    @pytest.fixture
    def db_path(tmp_path: Path) -> Path:
        return tmp_path / "store.db"

    @pytest.fixture
    def store(db_path: Path) -> Iterator[ExecutionStore]:
        opened = backend.open(str(db_path))
        yield opened
        opened.close()

    @pytest.fixture
    async def astore(db_path: Path) -> AsyncIterator[AsyncExecutionStore]:
        opened = await backend.aopen(str(db_path))
        yield opened
        await opened.close()

    @pytest.fixture
    def sql_backend() -> FileBackend:
        return backend

    return anyio_backend, harel_harness, db_path, store, astore, sql_backend
