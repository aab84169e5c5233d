"""What both drivers share about psycopg connections: how they are made, how a statement
template becomes SQL, and how a pooled connection is checked without a round trip.

* Every connection is in autocommit mode: each contract method is one statement, hence its
  own transaction, and no ``BEGIN``/``COMMIT`` round trip is ever added.  The one explicit
  transaction (schema creation) runs on a dedicated connection that is closed afterwards.
* ``prepare_threshold=None``: statements are never server-prepared, so a call is always one
  round trip (preparing costs an extra one), and the store works behind transaction poolers.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import ConnStatus, TransactionStatus

from harel_store_postgres._options import PostgresOptions


class Renderer:
    """Turns the plan's statement templates into SQL for one schema.

    ``{schema}`` is replaced by the schema name quoted by :class:`psycopg.sql.Identifier`;
    each template is rendered once and cached (the templates are a small fixed set, plus the
    listing's combinations of fixed clauses).
    """

    def __init__(self, schema: str) -> None:
        self._schema = sql.Identifier(schema)
        self._cache: dict[str, bytes] = {}

    def __call__(self, template: str) -> bytes:
        rendered = self._cache.get(template)
        if rendered is None:
            rendered = sql.SQL(template).format(schema=self._schema).as_bytes(None)
            self._cache[template] = rendered
        return rendered


def connect_kwargs(options: PostgresOptions) -> dict[str, Any]:
    """Keyword arguments of ``psycopg.connect``/``AsyncConnection.connect`` for ``options``."""
    return {**options.connect, "autocommit": True, "prepare_threshold": None}


def pool_kwargs(options: PostgresOptions) -> dict[str, Any]:
    """Keyword arguments of ``ConnectionPool``/``AsyncConnectionPool`` (opened later)."""
    return {
        "conninfo": "",
        "kwargs": connect_kwargs(options),
        "min_size": options.pool_min,
        "max_size": options.pool_max,
        "timeout": options.pool_timeout,
        "reconnect_timeout": options.reconnect_timeout,
        "open": False,
        "name": f"harel-postgres-{options.schema}",
    }


def connection_alive(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether a pooled, idle connection is still usable, judged WITHOUT a round trip.

    It reads (non-blocking) whatever the server sent while the connection sat in the pool: a
    server that restarted or terminated the backend has closed the socket, which shows up
    here, so the caller takes another connection instead of failing on a dead one.
    """
    if conn.closed or conn.broken:
        return False
    pgconn = conn.pgconn
    try:
        pgconn.consume_input()
    except psycopg.OperationalError:
        return False
    return (
        pgconn.status == ConnStatus.OK
        and pgconn.transaction_status == TransactionStatus.IDLE
        and not pgconn.is_busy()
    )
