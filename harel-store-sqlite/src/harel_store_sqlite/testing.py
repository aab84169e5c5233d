"""Conformance-kit support: an isolated SQLite database file per test.

``SqliteHarness(path)`` hands the kit stores over one file; every ``open_sync()`` /
``open_async()`` returns a new store object (a new connection) over that same file, which is
how restart and two-writer tests run.  ``url()`` names the file for a fresh interpreter,
``footprint()`` lists what the file holds for one execution, and ``destroy()`` closes what the
harness opened and removes the file with its WAL and shared-memory companions.
"""

from __future__ import annotations

import sqlite3
import uuid
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urlencode

from harel.conformance.harness import StoreHarness
from harel.store.common import drive
from harel.store.contract import Capabilities

from harel_store_sqlite._options import DEFAULT_BUSY_TIMEOUT_MS, make_options, parse_sqlite_url
from harel_store_sqlite._plan import sqlite_plan
from harel_store_sqlite._plugin import CAPABILITIES
from harel_store_sqlite._schema import pragmas
from harel_store_sqlite.aio import AsyncSqliteStore
from harel_store_sqlite.sync import SqliteStore, _execute

_COMPANIONS = ("", "-wal", "-shm", "-journal")


class SqliteHarness(StoreHarness):
    """One SQLite file as the kit's dataset (created empty on the first open)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "FULL",
    ) -> None:
        self.path = Path(path)
        if str(self.path) == ":memory:":
            raise ValueError("a harness needs a database file (':memory:' cannot be reopened)")
        self.options = make_options(  # validate now, not at the first open
            str(self.path), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        self._sync: weakref.WeakSet[SqliteStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncSqliteStore] = weakref.WeakSet()

    def open_sync(self) -> SqliteStore:
        """A new ``SqliteStore`` (its own connection) over the harness file."""
        store = SqliteStore(
            str(self.path),
            busy_timeout_ms=self.options.busy_timeout_ms,
            synchronous=self.options.synchronous,
        )
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncSqliteStore:
        """A new ``AsyncSqliteStore`` (its own connection and thread) over the harness file."""
        store = await AsyncSqliteStore.open(
            str(self.path),
            busy_timeout_ms=self.options.busy_timeout_ms,
            synchronous=self.options.synchronous,
        )
        self._async.add(store)
        return store

    def url(self) -> str:
        """``sqlite:////absolute/path.db?busy_timeout_ms=...&synchronous=...``."""
        query = urlencode(
            {
                "busy_timeout_ms": self.options.busy_timeout_ms,
                "synchronous": self.options.synchronous,
            }
        )
        return f"sqlite:///{quote(str(self.path.resolve()))}?{query}"

    def footprint(self, execution_id: str) -> list[str]:
        """Every row the file holds for ``execution_id``, read on a connection of its own."""
        conn = sqlite3.connect(str(self.path), isolation_level=None)
        try:
            plan = sqlite_plan(self.options)
            return drive(plan.footprint(execution_id), partial(_execute, conn))
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

    def destroy(self) -> None:
        """Close every store still open through this harness and delete the database files."""
        for store in list(self._sync):
            store.close()
        for astore in list(self._async):
            astore.close_blocking()
        for suffix in _COMPANIONS:
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def describe(self) -> str:
        """``sqlite <file>``."""
        return f"sqlite {self.path}"


def harness_from_url(url: str, workdir: Path) -> SqliteHarness:
    """A harness over a NEW file under ``workdir`` with the knobs of ``url``.

    The URL's own file (or ``:memory:``) is never touched: isolation means a fresh, empty file.
    """
    _path, knobs = parse_sqlite_url(url)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return SqliteHarness(
        workdir / f"harel-kit-{uuid.uuid4().hex}.db",
        busy_timeout_ms=knobs.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS),
        synchronous=knobs.get("synchronous", "FULL"),
    )
