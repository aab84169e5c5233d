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

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from harel.store.author import drive, redact_url
from harel.store.author.sql import FileBackend, FileHarness, FileKind, Statement
from harel.store.contract import Capabilities
from harel.store.errors import HarnessUnavailable

from harel_store_libsql._driver import connect, execute, open_database
from harel_store_libsql._options import make_options
from harel_store_libsql._plan import libsql_plan
from harel_store_libsql._spec import CAPABILITIES, parse_libsql_url
from harel_store_libsql.aio import AsyncLibsqlStore
from harel_store_libsql.sync import LibsqlStore


class LibsqlHarness(FileHarness):
    """One local libSQL file as the kit's dataset (created empty on the first open)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    kind = FileKind("libsql", "libsql+file:///", LibsqlStore, AsyncLibsqlStore, make_options)

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
    return LibsqlHarness.in_workdir(workdir, knobs)


def raw_connection(path: Path) -> Any:
    """A driver connection of its own (autocommit) on ``path``, for tests reading or locking
    the file beside a store (never the stdlib ``sqlite3`` while a libSQL one is open)."""
    return connect(make_options(str(path)))


FILE_BACKEND = FileBackend(
    "harel-store-libsql",
    LibsqlStore,
    AsyncLibsqlStore.open,
    "libsql+file:///{path}",
    LibsqlHarness,
    raw_connection,
)
"""This backend as the SQL family's shared test suite reaches it."""
