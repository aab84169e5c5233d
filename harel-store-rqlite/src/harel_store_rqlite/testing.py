"""Conformance-kit support: an isolated, empty rqlite database per test.

rqlite has one database per cluster (no schemas, no key prefixes), so a dataset is a whole
node:

* ``harness_from_url("rqlite://local-fake", workdir)`` — the backend's ``local_url`` — starts
  a :class:`~harel_testing.rqlite.FakeRqlite` node (rqlite's HTTP API over a new SQLite file
  under ``workdir``; test-only: ``pip install harel-testing[rqlite]``) on a free loopback port
  for this harness alone, and stops it (deleting the file) in ``destroy()``.  ``url()`` is
  that node's ``rqlite://127.0.0.1:PORT``, so other processes (the kit's multi-process checks,
  ``harel worker`` in the engine tests) reach it for as long as the harness lives.
* any other URL (``HAREL_TEST_RQLITE_URL``: a real rqlite node) — the harness uses that node's
  database: it refuses one that already holds harel tables (set ``HAREL_RQLITE_KIT_WIPE=1`` to
  drop them) and drops the harel tables in ``destroy()``.  Use a disposable node, one test run
  at a time.
"""

from __future__ import annotations

import json
import os
import time
import uuid
import weakref
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.author import needs_harel_testing, parse_store_url, redact_url
from harel.store.author.sql import Batch, Result, Statement, raw_side_statements
from harel.store.contract import Capabilities
from harel.store.errors import StoreConfigError

from harel_store_rqlite._options import make_options
from harel_store_rqlite._schema import TABLES
from harel_store_rqlite._spec import CAPABILITIES, DEFAULT_PORT, LOCAL_FAKE_HOST
from harel_store_rqlite.aio import AsyncRqliteStore
from harel_store_rqlite.sync import RqliteStore

if TYPE_CHECKING:
    from harel_testing.rqlite import FakeRqlite

LOCAL_FAKE_URL = f"rqlite://{LOCAL_FAKE_HOST}"
"""The backend's ``local_url``: "start a fake node for this harness"."""
WIPE_VARIABLE = "HAREL_RQLITE_KIT_WIPE"
_THROUGH_PROXY: dict[str, Any] = {"connect_retries": 4, "retry_delay": 0.05, "timeout": 2.0}
"""Knobs of the stores the lost-reply tests open through a proxy."""


class RqliteHarness(StoreHarness):
    """One rqlite node's database as the kit's dataset (``server``: a fake node it owns)."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, url: str, *, server: FakeRqlite | None = None) -> None:
        self._url = url
        self.server = server
        self._sync: weakref.WeakSet[RqliteStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncRqliteStore] = weakref.WeakSet()

    def open_sync(self) -> RqliteStore:
        """A new ``RqliteStore`` (its own HTTP client) over the harness's node."""
        store = RqliteStore(self._url)
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncRqliteStore:
        """A new ``AsyncRqliteStore`` (its own HTTP client) over the harness's node."""
        store = await AsyncRqliteStore.open(self._url)
        self._async.add(store)
        return store

    def url(self) -> str:
        """The node's store URL (credentials included: hand it to the registry only)."""
        return self._url

    def server_address(self) -> tuple[str, int]:
        """The node's HTTP address, for the kit's lost-reply tests (a proxy goes in front)."""
        options = make_options(self._url)
        parts = urlsplit(options.base_url)
        return parts.hostname or "127.0.0.1", parts.port or DEFAULT_PORT

    def _url_at(self, host: str, port: int) -> str:
        """This harness's URL (credentials, prefix and knobs kept) pointing at ``host:port``."""
        parts = urlsplit(self._url)
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def open_sync_at(self, host: str, port: int) -> RqliteStore:
        """A new ``RqliteStore`` talking to ``host:port`` (a proxy in front of the node):
        short connect retries and a 2 s request timeout, so that a cut connection is
        reported (or the store reopened) within seconds."""
        store = RqliteStore.from_url(self._url_at(host, port), **_THROUGH_PROXY)
        self._sync.add(store)
        return store

    async def open_async_at(self, host: str, port: int) -> AsyncRqliteStore:
        """The async twin of :meth:`open_sync_at`."""
        store = await AsyncRqliteStore.from_url(self._url_at(host, port), **_THROUGH_PROXY)
        self._async.add(store)
        return store

    def footprint(self, execution_id: str) -> list[str]:
        """Every row the database holds for ``execution_id`` (the shared footprint queries,
        sent straight to the node)."""
        with RqliteStore.unopened(self._url) as store:
            return store._run(store._plan.footprint(execution_id))

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: the shared CAS ``UPDATE`` of the execution alone, one
        ``POST /db/execute`` on an HTTP client of its own (no side writes, no found read)."""
        store = RqliteStore.unopened(self._url)
        self._sync.add(store)
        update = store._plan.sql.update_execution

        def write(execution_id: str, version: int, document: str) -> None:
            fields = json.loads(document)
            statement = update.bind(
                id=execution_id,
                expected=version,
                version=version + 1,
                data=document,
                definition_id=fields["definition_id"],
                status=fields["status"],
                outcome=fields.get("outcome"),
                active_path=fields.get("active_path"),
                parent_id=fields.get("parent_id"),
                updated_at=time.time(),
                token=None,
            )
            if store._run(_one(statement)).rowcount != 1:
                raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

        return write

    def raw_side_commit(self) -> RawSideCommit:
        """The benchmarks' raw side commit: the SQL family's :func:`raw_side_statements` (the
        CAS ``UPDATE``, outbox, mark, timer upsert, trace) as ONE batch, one ``POST
        /db/execute`` (one transaction) on an HTTP client of its own.  A batch cannot branch:
        a missed CAS (``RuntimeError``) still stores the side rows; the bench never misses."""
        store = RqliteStore.unopened(self._url)
        self._sync.add(store)

        def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
            batch = Batch(raw_side_statements(execution_id, version, document, side))
            if store._run(_batch(batch))[0].rowcount != 1:
                raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

        return write

    def drop_tables(self) -> None:
        """Drop every harel table of the node's database (indexes go with them)."""
        with RqliteStore.unopened(self._url) as store:
            for table in TABLES:
                store._run(_one(Statement(f"DROP TABLE IF EXISTS {table}")))

    def holds_tables(self) -> bool:
        """Whether the node's database has any harel table."""
        with RqliteStore.unopened(self._url) as store:
            probe = store._plan.sql.tables_probe.bind()
            return bool(store._run(_one(probe)).rows)

    def destroy(self) -> None:
        """Forget the stores opened through this harness; stop the fake node (deleting its
        file), or drop the harel tables of a real one."""
        for store in list(self._sync):
            store.close()
        for astore in list(self._async):
            astore.close_blocking()  # no event loop needed: the store's worker thread closes it
        if self.server is not None:
            self.server.close()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.server.path}{suffix}").unlink(missing_ok=True)
        else:
            self.drop_tables()

    def describe(self) -> str:
        """``rqlite <node>`` (no credentials)."""
        kind = "fake rqlite" if self.server is not None else "rqlite"
        return f"{kind} {redact_url(self._url)}"


def _one(statement: Statement) -> Generator[Statement, Any, Result]:
    """A plan-shaped operation of one statement (for the harness's own housekeeping)."""
    result: Result = yield statement
    return result


def _batch(batch: Batch) -> Generator[Batch, Any, list[Result]]:
    """A plan-shaped operation of one batch: one result per statement."""
    results: list[Result] = yield batch
    return results


def harness_from_url(url: str, workdir: Path) -> RqliteHarness:
    """A harness over an empty database: a new fake node for ``rqlite://local-fake``, the
    node ``url`` names otherwise (see the module docstring)."""
    parsed = parse_store_url(url)
    if parsed.host == LOCAL_FAKE_HOST:
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        with needs_harel_testing("rqlite"):
            from harel_testing.rqlite import FakeRqlite
        server = FakeRqlite(workdir / f"fake-rqlite-{uuid.uuid4().hex}.db").start()
        return RqliteHarness(server.url, server=server)
    harness = RqliteHarness(url)
    if harness.holds_tables():
        if os.environ.get(WIPE_VARIABLE) != "1":
            raise StoreConfigError(
                f"{parsed.redacted} already holds harel tables; the conformance kit needs an "
                f"empty database and drops it afterwards: point it at a disposable node, or set "
                f"{WIPE_VARIABLE}=1 to drop those tables first"
            )
        harness.drop_tables()
    return harness
