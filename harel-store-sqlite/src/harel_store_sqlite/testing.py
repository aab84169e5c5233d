"""Conformance-kit support: an isolated SQLite database file per test.

``SqliteHarness(path)`` hands the kit stores over one file; every ``open_sync()`` /
``open_async()`` returns a new store object (a new connection) over that same file, which is
how restart and two-writer tests run.  ``url()`` names the file for a fresh interpreter,
``footprint()`` lists what the file holds for one execution, and ``destroy()`` closes what the
harness opened and removes the file with its WAL and shared-memory companions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar

from harel.store.author import drive
from harel.store.author.sql import FileBackend, FileHarness, FileKind
from harel.store.contract import Capabilities

from harel_store_sqlite._options import make_options
from harel_store_sqlite._plan import sqlite_plan
from harel_store_sqlite._schema import pragmas
from harel_store_sqlite._spec import CAPABILITIES, parse_sqlite_url
from harel_store_sqlite.aio import AsyncSqliteStore
from harel_store_sqlite.sync import SqliteStore, _run_statement


class SqliteHarness(FileHarness):
    """One SQLite file as the kit's dataset (created empty on the first open)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    kind = FileKind("sqlite", "sqlite:///", SqliteStore, AsyncSqliteStore, make_options)

    def footprint(self, execution_id: str) -> list[str]:
        """Every row the file holds for ``execution_id``, read on a connection of its own."""
        conn = sqlite3.connect(str(self.path), isolation_level=None)
        try:
            plan = sqlite_plan(self.options)
            return drive(plan.footprint(execution_id), partial(_run_statement, conn))
        finally:
            conn.close()

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: one CAS ``UPDATE`` of the document, its own (implicit)
        transaction, on a new connection with the stores' PRAGMAs."""
        conn = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=30.0
        )
        for pragma in pragmas(self.options):
            conn.execute(pragma).fetchall()

        def write(execution_id: str, version: int, document: str) -> None:
            cursor = conn.execute(
                "UPDATE executions SET data = ?, version = ? WHERE id = ? AND version = ?",
                (document, version + 1, execution_id, version),
            )
            if cursor.rowcount != 1:
                raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

        return write


def harness_from_url(url: str, workdir: Path) -> SqliteHarness:
    """A harness over a NEW file under ``workdir`` with the knobs of ``url``.

    The URL's own file (or ``:memory:``) is never touched: isolation means a fresh, empty file.
    """
    _path, knobs = parse_sqlite_url(url)
    return SqliteHarness.in_workdir(workdir, knobs)


FILE_BACKEND = FileBackend(
    "harel-store-sqlite", SqliteStore, AsyncSqliteStore.open, "sqlite:///{path}", SqliteHarness
)
"""This backend as the SQL family's shared test suite reaches it."""
