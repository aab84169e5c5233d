"""Wake-ups on PostgreSQL: ``LISTEN`` on the schema's channel, ``NOTIFY`` from the writes.

The writes that touch work rows (``harel_commit`` / ``harel_import`` with work touches,
``harel_release`` leaving work) call ``pg_notify(channel, '')`` in their own transaction, so
the signal is delivered when (and only if) the write commits; a state-only commit sends none.
The waiter (:class:`harel.store.common.wakeups.Wakeups`' rules) holds one dedicated
autocommit connection outside the pool, ``LISTEN``\\ s once, and blocks in psycopg's
``notifies(timeout=..., stop_after=1)``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from harel.store.author import AsyncWakeups, Wakeups, unavailable
from harel.store.author.sql import Result, Statement
from harel.store.errors import StoreError, StoreUnavailable
from psycopg import sql

from harel_store_postgres._conn import connect_kwargs
from harel_store_postgres._errors import DRIVER_ERRORS, connect_error, map_error
from harel_store_postgres._options import PostgresOptions

CHANNEL_PREFIX = "harel_wake_"

POKE = "SELECT pg_notify(%s, 'close')"
"""What ``close()`` sends to end a wait in progress (the channel is a bound value)."""


def channel(schema: str) -> str:
    """The schema's wake-up channel: ``harel_wake_`` + the first 32 hex digits of the SHA-256
    of its UTF-8 name (43 bytes, under PostgreSQL's 63; the functions compute the same:
    :data:`~harel_store_postgres._schema.WAKE_CHANNEL_SQL`)."""
    return CHANNEL_PREFIX + hashlib.sha256(schema.encode("utf-8")).hexdigest()[:32]


def _lost(exc: BaseException, where: str) -> StoreError:
    """A driver error of the listening connection: ``StoreUnavailable`` saying so when the
    connection failed (the waiter hangs up and listens again next time)."""
    mapped = map_error(exc, where)
    if isinstance(mapped, StoreUnavailable):
        return unavailable(where, str(exc).strip() or type(exc).__name__)
    return mapped


def _listen_sql(schema: str) -> sql.Composed:
    return sql.SQL("LISTEN {}").format(sql.Identifier(channel(schema)))


def poke_statement(schema: str) -> Statement:
    """The statement that sends one signal on the schema's channel."""
    return Statement(POKE, (channel(schema),))


class PostgresWakeups(Wakeups[psycopg.Connection[Any]]):
    """The sync store's waiter; ``poke`` runs one statement through the store's pool."""

    def __init__(self, options: PostgresOptions, poke: Callable[[Statement], Result]) -> None:
        super().__init__(options.where)
        self._options = options
        self._run = poke

    def _listen(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(**connect_kwargs(self._options))
        except DRIVER_ERRORS as exc:
            raise connect_error(exc, self.where) from exc
        try:
            conn.execute(_listen_sql(self._options.schema))
        except DRIVER_ERRORS as exc:
            conn.close()
            raise map_error(exc, self.where) from exc
        return conn

    def _receive(self, handle: psycopg.Connection[Any], seconds: float) -> bool:
        woke = False
        try:
            for _ in handle.notifies(timeout=seconds, stop_after=1):
                woke = True
            if woke:
                for _ in handle.notifies(timeout=0):
                    pass  # consumed: their writes committed before this returns
        except DRIVER_ERRORS as exc:
            raise _lost(exc, self.where) from exc
        return woke

    def _hang_up(self, handle: psycopg.Connection[Any]) -> None:
        with contextlib.suppress(*DRIVER_ERRORS):
            handle.close()

    def _poke(self) -> None:
        self._run(poke_statement(self._options.schema))


class AsyncPostgresWakeups(AsyncWakeups[psycopg.AsyncConnection[Any]]):
    """The asyncio store's waiter (psycopg's async connection)."""

    def __init__(
        self, options: PostgresOptions, poke: Callable[[Statement], Awaitable[Result]]
    ) -> None:
        super().__init__(options.where)
        self._options = options
        self._run = poke

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        try:
            conn = await psycopg.AsyncConnection.connect(**connect_kwargs(self._options))
        except DRIVER_ERRORS as exc:
            raise connect_error(exc, self.where) from exc
        try:
            await conn.execute(_listen_sql(self._options.schema))
        except DRIVER_ERRORS as exc:
            await conn.close()
            raise map_error(exc, self.where) from exc
        return conn

    async def _receive(self, handle: psycopg.AsyncConnection[Any], seconds: float) -> bool:
        woke = False
        try:
            async for _ in handle.notifies(timeout=seconds, stop_after=1):
                woke = True
            if woke:
                async for _ in handle.notifies(timeout=0):
                    pass  # consumed: their writes committed before this returns
        except DRIVER_ERRORS as exc:
            raise _lost(exc, self.where) from exc
        return woke

    async def _hang_up(self, handle: psycopg.AsyncConnection[Any]) -> None:
        with contextlib.suppress(*DRIVER_ERRORS):
            await handle.close()

    async def _poke(self) -> None:
        await self._run(poke_statement(self._options.schema))
