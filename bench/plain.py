"""Figure 2's plain raw write: the state-only write a user would code without this project.

Pydantic's own JSON encoding of the execution (``exe.model_dump_json()``, none of the
project's codec or payload checks) and a plain four-column table ``plain_raw_executions (id
TEXT PRIMARY KEY, version INTEGER, definition_id TEXT, document TEXT)`` in the same database
file or server, opened with the same settings as the stores; each write is one CAS ``UPDATE
... WHERE id = ? AND version = ?`` in its own (autocommit) transaction.  Redis: one plain
``SET`` of the pydantic JSON on a scratch key of the harness's namespace (no CAS: Redis'
cheapest write of one document).

It serves only the benchmarks, so it lives here, out of every runtime code path; backends it
does not know get ``None`` (figure 2 then shows no plain raw column for them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harel.conformance.harness import StoreHarness
from harel.model import Execution

PlainRaw = Callable[[Execution], None]
"""Write ``exe`` (whose ``version`` is the stored one) with a CAS and bump ``exe.version``."""

TABLE = "plain_raw_executions"
_CREATE = (
    "CREATE TABLE IF NOT EXISTS plain_raw_executions "
    "(id TEXT PRIMARY KEY, version INTEGER, definition_id TEXT, document TEXT)"
)
_INSERT = (
    "INSERT INTO plain_raw_executions (id, version, definition_id, document) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_UPDATE = "UPDATE plain_raw_executions SET version = ?, document = ? WHERE id = ? AND version = ?"


def _writer(conn: Any, insert: Any, update: Any) -> PlainRaw:
    """The plain raw write over a DB-API connection in autocommit mode: the first write of an
    execution inserts its row (once), every write is one CAS ``update`` of it."""
    seen: set[str] = set()

    def write(exe: Execution) -> None:
        if exe.id not in seen:
            conn.execute(insert, (exe.id, exe.version, exe.definition_id, exe.model_dump_json()))
            seen.add(exe.id)
        document = exe.model_dump_json()
        cursor = conn.execute(update, (exe.version + 1, document, exe.id, exe.version))
        if cursor.rowcount != 1:
            raise RuntimeError(f"plain raw write: {exe.id!r} is not at version {exe.version}")
        exe.version += 1

    return write


def _sqlite(harness: Any) -> tuple[PlainRaw, Callable[[], None]]:
    import sqlite3

    from harel_store_sqlite._schema import pragmas

    conn = sqlite3.connect(str(harness.path), isolation_level=None, check_same_thread=False)
    for pragma in pragmas(harness.options):
        conn.execute(pragma).fetchall()
    conn.execute(_CREATE)
    return _writer(conn, _INSERT, _UPDATE), conn.close


def _libsql(harness: Any) -> tuple[PlainRaw, Callable[[], None]]:
    from harel_store_libsql._driver import connect
    from harel_store_libsql._schema import pragmas

    conn = connect(harness.options)
    for pragma in pragmas(harness.options):
        conn.execute(pragma).fetchall()
    conn.execute(_CREATE)
    return _writer(conn, _INSERT, _UPDATE), conn.close


def _postgres(harness: Any) -> tuple[PlainRaw, Callable[[], None]]:
    from psycopg import sql

    conn = harness.connect(autocommit=True)
    table = sql.Identifier(harness.schema, TABLE)
    create = "CREATE TABLE IF NOT EXISTS {} (id TEXT PRIMARY KEY, version INTEGER, "
    conn.execute(sql.SQL(create + "definition_id TEXT, document TEXT)").format(table))
    insert = sql.SQL(
        "INSERT INTO {} (id, version, definition_id, document) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING"
    ).format(table)
    update = sql.SQL(
        "UPDATE {} SET version = %s, document = %s WHERE id = %s AND version = %s"
    ).format(table)
    write = _writer(conn, insert, update)

    def close() -> None:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.close()

    return write, close


def _redis(harness: Any) -> tuple[PlainRaw, Callable[[], None]]:
    client = harness._raw()  # a new client with the stores' settings
    prefix: bytes = harness.keys.prefix + b"plain-raw:"  # destroy() deletes the namespace

    def write(exe: Execution) -> None:
        client.set(prefix + exe.id.encode(), exe.model_dump_json())
        exe.version += 1

    return write, client.close


_BACKENDS: dict[str, Callable[[Any], tuple[PlainRaw, Callable[[], None]]]] = {
    "SqliteHarness": _sqlite,
    "LibsqlHarness": _libsql,
    "PostgresHarness": _postgres,
    "RedisHarness": _redis,
}


@contextmanager
def plain_raw(harness: StoreHarness) -> Iterator[PlainRaw | None]:
    """The plain raw write over ``harness``'s dataset, which a store of the harness has
    already opened (``None`` for a backend it does not know); its connection is closed (and
    its PostgreSQL table dropped) on exit."""
    opener = _BACKENDS.get(type(harness).__name__)
    if opener is None:
        yield None
        return
    write, close = opener(harness)
    try:
        yield write
    finally:
        close()
