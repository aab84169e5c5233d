"""Conformance-kit support: one fresh, empty PostgreSQL schema per harness.

``PostgresHarness(url)`` takes a new schema name (``<schema>_kit_<random>``) on the server the
URL names; every ``open_sync()`` / ``open_async()`` returns a new store (a new pool) over it,
which is how restart and two-writer tests run.  ``url()`` is the URL with ``?schema=`` set, for
the kit's fresh-interpreter checks.

``destroy()`` closes the sync stores it opened and drops the schema.  Creating the layout costs
about 0.1 s of DDL, so a harness made with ``reuse=True`` (this backend's own test run does)
empties an intact schema instead (``DELETE`` of every row, in one transaction) and hands it to
the next such harness of this process on the same server; the schemas still spare at
interpreter exit are dropped then.  A schema whose layout a test changed (or that cannot be
locked quickly) is dropped at once.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.contract import Capabilities
from psycopg import sql

from harel_store_postgres._conn import connect_kwargs
from harel_store_postgres._options import PostgresOptions, make_options
from harel_store_postgres._schema import SCHEMA_VERSION, TABLES
from harel_store_postgres._spec import CAPABILITIES
from harel_store_postgres.aio import AsyncPostgresStore
from harel_store_postgres.sync import PostgresStore

_FOOTPRINT = (
    ("execution", "SELECT '' FROM {schema}.executions WHERE id = %s"),
    ("processed:", "SELECT event_id FROM {schema}.processed_events WHERE execution_id = %s"),
    ("timer:", "SELECT path FROM {schema}.timers WHERE execution_id = %s"),
    ("outbox:", "SELECT seq::text FROM {schema}.outbox WHERE target_id = %s"),
    ("spawn:", "SELECT seq::text FROM {schema}.spawns WHERE parent_id = %s"),
    ("trace:", "SELECT idx::text FROM {schema}.trace WHERE execution_id = %s"),
    ("work", "SELECT '' FROM {schema}.work WHERE key = %s"),
)


_RAW_SIDE = (
    # the CAS: a missed one divides by zero, which aborts the whole transaction
    "WITH cas AS (UPDATE {schema}.executions SET data = %s, version = %s "
    "WHERE id = %s AND version = %s RETURNING 1) SELECT 1 / count(*) FROM cas",
    "INSERT INTO {schema}.outbox (target_id, event) VALUES (%s, %s)",
    "INSERT INTO {schema}.processed_events (execution_id, event_id, processed_at) "
    "VALUES (%s, %s, %s)",
    "INSERT INTO {schema}.timers (execution_id, path, fire_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (execution_id, path) DO UPDATE SET fire_at = excluded.fire_at",
    "INSERT INTO {schema}.trace (execution_id, idx, entry) VALUES (%s, %s, %s)",
)
"""The benchmarks' raw side commit, in the order sent."""


_SPARE: dict[tuple[tuple[str, str], ...], list[str]] = {}
"""Emptied schemas of this process, by server (connection keywords), ready for reuse."""
_SPARE_LOCK = threading.Lock()
_DATA_TABLES = [table for table in TABLES if table != "harel_schema"]


def _server_key(connect: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(connect.items()))


def _drop(connect: Mapping[str, str], schema: str, timeout: str = "10") -> None:
    settings: dict[str, Any] = {**connect, "autocommit": True, "connect_timeout": timeout}
    with psycopg.connect(**settings) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@atexit.register
def _drop_spares() -> None:
    """Drop every schema still spare when the interpreter exits."""
    with _SPARE_LOCK:
        spares = [(dict(key), name) for key, names in _SPARE.items() for name in names]
        _SPARE.clear()
    for connect, schema in spares:
        with contextlib.suppress(psycopg.Error):
            _drop(connect, schema, timeout="2")


class PostgresHarness(StoreHarness):
    """A fresh schema on the server ``url`` names, as the kit's dataset."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self, url: str, *, schema: str | None = None, reuse: bool = False, **knobs: Any
    ) -> None:
        """A harness on ``url``'s server over ``schema`` (default: a new one).

        ``reuse=True`` (for a long test run in one process) takes a spare schema when there is
        one and leaves its own as a spare on ``destroy()``; spares are dropped when the
        interpreter exits normally (a process killed meanwhile leaves them behind, which is
        why it is not the default).
        """
        base = make_options(url, **knobs)
        self._reuse = reuse and schema is None
        if schema is None:
            schema = (_take_spare(base.connect) if reuse else None) or _new_name(base.schema)
        self.options = base.with_schema(schema)
        self.schema = self.options.schema
        self._url = _with_schema(url, self.schema)
        self._sync: weakref.WeakSet[PostgresStore] = weakref.WeakSet()
        self._raw: list[psycopg.Connection[Any]] = []  # the benchmarks' connections

    def open_sync(self) -> PostgresStore:
        """A new ``PostgresStore`` (its own pool) over the harness schema."""
        store = PostgresStore.open(self.options)
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncPostgresStore:
        """A new ``AsyncPostgresStore`` (its own pool) over the harness schema."""
        return await AsyncPostgresStore.open(self.options)

    def server_address(self) -> tuple[str, int] | None:
        """The server's TCP address, for the kit's lost-reply tests; ``None`` for a Unix
        socket or several hosts."""
        host = self.options.connect.get("host", "")
        if not host or host.startswith("/") or "," in host:
            return None
        return host, int(self.options.connect.get("port") or 5432)

    def options_at(self, host: str, port: int) -> PostgresOptions:
        """The harness's options over ``host:port`` (a proxy), with short waits: connect
        attempts of 2 s, two open retries, the pool retrying a lost connection for 1 s."""
        connect = {**self.options.connect, "host": host, "port": str(port), "connect_timeout": "2"}
        return replace(
            self.options, connect=connect, connect_retries=2, retry_delay=0.2, reconnect_timeout=1.0
        )

    def open_sync_at(self, host: str, port: int) -> PostgresStore:
        """A new ``PostgresStore`` over the harness schema through ``host:port``."""
        store = PostgresStore.open(self.options_at(host, port))
        self._sync.add(store)
        return store

    async def open_async_at(self, host: str, port: int) -> AsyncPostgresStore:
        """A new ``AsyncPostgresStore`` over the harness schema through ``host:port``."""
        return await AsyncPostgresStore.open(self.options_at(host, port))

    def url(self) -> str:
        """The server URL with ``?schema=`` naming this harness's schema."""
        return self._url

    def footprint(self, execution_id: str) -> list[str]:
        """Every row of this schema that belongs to ``execution_id``, read with plain SQL."""
        labels: list[str] = []
        with self.connect() as conn:
            if not self._exists(conn):
                return labels
            for label, template in _FOOTPRINT:
                query = sql.SQL(template).format(schema=sql.Identifier(self.schema))
                rows = conn.execute(query, (execution_id,)).fetchall()
                labels.extend(label + str(row[0]) if label.endswith(":") else label for row in rows)
        return labels

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write: one CAS ``UPDATE`` of the document in its own
        (autocommit) transaction, on a new connection with the stores' settings."""
        conn = self.connect(autocommit=True)
        self._raw.append(conn)
        query = sql.SQL(
            "UPDATE {}.executions SET data = %s, version = %s WHERE id = %s AND version = %s"
        ).format(sql.Identifier(self.schema))

        def write(execution_id: str, version: int, document: str) -> None:
            cursor = conn.execute(query, (document, version + 1, execution_id, version))
            if cursor.rowcount != 1:
                raise RuntimeError(f"raw write: {execution_id!r} is not at version {version}")

        return write

    def raw_side_commit(self) -> RawSideCommit:
        """The benchmarks' raw side commit: the CAS ``UPDATE`` and the outbox, mark, timer
        upsert and trace statements in ONE transaction, pipelined (one round trip, like the
        store's ``harel_commit``), on a new connection with the stores' settings; a missed CAS
        aborts the transaction (psycopg raises ``DivisionByZero``)."""
        conn = self.connect()
        self._raw.append(conn)
        cas, outbox, mark, timer, trace = (
            sql.SQL(text).format(schema=sql.Identifier(self.schema)) for text in _RAW_SIDE
        )

        def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
            with conn.pipeline(), conn.transaction():
                conn.execute(cas, (document, version + 1, execution_id, version))
                conn.execute(outbox, (execution_id, side.emit))
                conn.execute(mark, (execution_id, side.event_id, side.now))
                conn.execute(timer, (execution_id, side.timer_path, side.fire_at))
                conn.execute(trace, (execution_id, side.trace_index, side.trace))

        return write

    def destroy(self) -> None:
        """Close the sync stores this harness opened; empty the schema for reuse when its
        layout is intact, else drop it (CASCADE)."""
        for store in list(self._sync):
            store.close()
        for conn in self._raw:
            conn.close()
        if not (self._reuse and self._empty_for_reuse()):
            _drop(self.options.connect, self.schema)

    def _empty_for_reuse(self) -> bool:
        schema = sql.Identifier(self.schema)
        try:
            with self.connect() as conn, conn.transaction():
                if not self._exists(conn):
                    return False
                conn.execute("SET LOCAL lock_timeout = '5s'")
                version = conn.execute(
                    sql.SQL("SELECT max(version) FROM {}.harel_schema").format(schema)
                ).fetchone()
                if version is None or version[0] != SCHEMA_VERSION:
                    return False
                for table in _DATA_TABLES:  # DELETE: TRUNCATE's new files cost far more here
                    conn.execute(sql.SQL("DELETE FROM {}.{}").format(schema, sql.Identifier(table)))
        except psycopg.Error:
            return False
        with _SPARE_LOCK:
            _SPARE.setdefault(_server_key(self.options.connect), []).append(self.schema)
        return True

    def describe(self) -> str:
        """``postgres <redacted url> schema <name>``."""
        return f"postgres {self.options.where} schema {self.schema}"

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        """A plain psycopg connection to the harness's server (for checks done with raw SQL)."""
        return psycopg.connect(**{**connect_kwargs(self.options), "autocommit": autocommit})

    def _exists(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT to_regclass(format('%%I.executions', %s::text)) IS NOT NULL", (self.schema,)
        ).fetchone()
        return bool(row and row[0])


def _with_schema(url: str, schema: str) -> str:
    """``url`` with its ``schema`` query parameter set to ``schema`` (the others kept)."""
    parts = urlsplit(url)
    query = [pair for pair in parse_qsl(parts.query, keep_blank_values=True) if pair[0] != "schema"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("schema", schema)])))


def _new_name(prefix: str) -> str:
    head = prefix.encode("utf-8")[:40].decode("utf-8", "ignore")
    return f"{head}_kit_{uuid.uuid4().hex[:16]}"


def _take_spare(connect: Mapping[str, str]) -> str | None:
    with _SPARE_LOCK:
        spares = _SPARE.get(_server_key(connect))
        return spares.pop() if spares else None


def harness_from_url(url: str, workdir: Path) -> PostgresHarness:
    """A harness over a NEW schema on the server of ``url`` (its ``schema`` is the prefix).

    ``workdir`` is not used: the data lives on the server.
    """
    del workdir
    return PostgresHarness(url)
