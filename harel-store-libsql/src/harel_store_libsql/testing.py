"""Conformance-kit support: an isolated libSQL database file per test.

``LibsqlHarness(path)`` hands the kit stores over one local file run by libSQL's engine; every
``open_sync()`` / ``open_async()`` returns a new store object (a new connection) over that same
file, which is how restart and two-writer tests run.  ``url()`` names the file for a fresh
interpreter, ``footprint()`` lists what the file holds for one execution (read on a driver
connection of its own), and ``destroy()`` closes what the harness opened and removes the file
with its WAL and shared-memory companions.

Only local files: the kit needs a fresh, empty dataset per test, which a harness cannot carve
out of a libSQL server's (or a replica's primary's) one database, so server and replica URLs
are refused by :func:`harness_from_url`.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, urlencode

from harel.conformance.harness import StoreHarness
from harel.store.common import drive, redact_url
from harel.store.common.sql import Statement
from harel.store.contract import Capabilities
from harel.store.errors import HarnessUnavailable

from harel_store_libsql._driver import connect, execute, open_database
from harel_store_libsql._options import (
    DEFAULT_BUSY_TIMEOUT_MS,
    MEMORY,
    LibsqlKnobs,
    make_options,
    parse_libsql_url,
)
from harel_store_libsql._plan import libsql_plan
from harel_store_libsql._plugin import CAPABILITIES
from harel_store_libsql.aio import AsyncLibsqlStore
from harel_store_libsql.sync import LibsqlStore

_COMPANIONS = ("", "-wal", "-shm", "-journal")


class LibsqlHarness(StoreHarness):
    """One local libSQL file as the kit's dataset (created empty on the first open)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        synchronous: str = "FULL",
    ) -> None:
        self.path = Path(path)
        if str(path) == MEMORY:
            raise ValueError("a harness needs a database file (':memory:' cannot be reopened)")
        self.options = make_options(  # validate now, not at the first open
            str(self.path), busy_timeout_ms=busy_timeout_ms, synchronous=synchronous
        )
        self._sync: weakref.WeakSet[LibsqlStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncLibsqlStore] = weakref.WeakSet()

    def _knobs(self) -> LibsqlKnobs:
        return {
            "busy_timeout_ms": self.options.busy_timeout_ms,
            "synchronous": self.options.synchronous,
        }

    def open_sync(self) -> LibsqlStore:
        """A new ``LibsqlStore`` (its own connection) over the harness file."""
        store = LibsqlStore(str(self.path), **self._knobs())
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncLibsqlStore:
        """A new ``AsyncLibsqlStore`` (its own connection and thread) over the harness file."""
        store = await AsyncLibsqlStore.open(str(self.path), **self._knobs())
        self._async.add(store)
        return store

    def url(self) -> str:
        """``libsql+file:////absolute/path.db?busy_timeout_ms=...&synchronous=...``."""
        return f"libsql+file:///{quote(str(self.path.resolve()))}?{urlencode(self._knobs())}"

    def footprint(self, execution_id: str) -> list[str]:
        """Every row the file holds for ``execution_id``, read on a connection of its own."""
        conn = connect(self.options)
        try:
            plan = libsql_plan(self.options)
            return drive(plan.footprint(execution_id), partial(execute, conn, self.options))
        finally:
            conn.close()

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: one CAS ``UPDATE`` of the document, its own (implicit)
        transaction, on a new driver connection with the stores' PRAGMAs."""
        conn, _plan = open_database(self.options)

        def write(execution_id: str, version: int, document: str) -> None:
            sql = "UPDATE executions SET data = ?, version = ? WHERE id = ? AND version = ?"
            params = (document, version + 1, execution_id, version)
            if execute(conn, self.options, Statement(sql, params)).rowcount != 1:
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
        """``libsql <file>``."""
        return f"libsql {self.path}"


def harness_from_url(url: str, workdir: Path) -> LibsqlHarness:
    """A harness over a NEW file under ``workdir`` with the local knobs of ``url``.

    The URL's own file (or ``:memory:``) is never touched: isolation means a fresh, empty file.
    A server URL (``libsql://``) or a replica (``?sync_url=``) raises
    :class:`HarnessUnavailable`: the kit cannot isolate a dataset on a server.
    """
    database, knobs = parse_libsql_url(url)
    if make_options(database, **knobs).mode != "file":
        raise HarnessUnavailable(
            f"the libSQL conformance harness runs on local files only; {redact_url(url)} names "
            "a server or a replica, whose one database the kit cannot isolate or drop per "
            "test: run the kit against libsql+file:///scratch.db (the same engine), and the "
            "server with your own integration tests"
        )
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return LibsqlHarness(
        workdir / f"harel-kit-{uuid.uuid4().hex}.db",
        busy_timeout_ms=knobs.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS),
        synchronous=knobs.get("synchronous", "FULL"),
    )
