"""The sync store's own lane to the server: one connection of the client it made, kept.

``redis.Redis.execute_command`` checks a connection out of the pool for every command (a lock,
a readiness poll of the socket, metrics) and wraps the call in its retry machinery: about a
quarter of a state-only commit's client time.  A store that built its own client
(:meth:`RedisStore.from_url <harel_store_redis.sync.RedisStore.from_url>`, no client-side
retries, RESP2) sends its scripts (``EVALSHA``, ``EVAL``: every commit among them; redis-py
has no reply callback for them) on one connection it keeps instead: packed by hiredis (a
dependency of this package; without it, by redis-py), sent and read on it as redis-py's own
pipelines and pub/sub do.  What it guarantees:

* one request at a time on it: a thread that finds the lane busy goes through the pool, as
  every request did before (so a store shared by threads keeps working in parallel);
* the pool's readiness check before every request: a connection the server closed while it
  sat idle (a restart), or one holding unread data, is reconnected before anything is sent,
  so a server that is down still fails the request as *not sent* (``StoreUnavailable``);
* a reply is read by the request that sent it, or by nobody: any failure between sending and
  reading (a timeout, a cut connection, an interruption) closes the connection, and the next
  request reconnects; only a server error reply (read whole) leaves it open;
* the same errors reach the error mapping (:func:`harel_store_redis._errors.map_error`): a
  reconnection that fails still fails inside redis-py's ``connect``, so it still proves that
  nothing was sent;
* the connection counts against the pool's ``max_connections`` (it was checked out of the
  pool) and goes back to the pool when the store closes; after a ``fork`` the child leaves
  the parent's connection alone and checks out its own.

A client passed in by the caller is never used so (its pool, retries and callbacks are the
caller's): every request goes through ``execute_command``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

import redis
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

BUSY: Final = object()
"""What :meth:`Lane.send` returns for a request it did not send (the pool must carry it)."""

SCRIPT_COMMANDS: Final = frozenset({"EVALSHA", "EVAL"})
"""The requests the lane carries: a name of one word, arguments of str, bytes and int only."""

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack
except ImportError:  # a dependency, but an install without it still works (redis-py packs)
    _pack = None

_forks = [0]
"""How many times this process came out of a ``fork`` (a lane made before is the parent's):
counted by an ``at fork`` hook, so a request costs no ``getpid`` system call."""


def _forked() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):  # (no fork on Windows)
    os.register_at_fork(after_in_child=_forked)


class Lane:
    """One kept connection of ``client``'s pool, for the script calls (:data:`SCRIPT_COMMANDS`)."""

    def __init__(self, client: redis.Redis) -> None:
        self._pool: Any = client.connection_pool
        callbacks: Mapping[Any, Any] = client.response_callbacks
        self._commands = frozenset(name for name in SCRIPT_COMMANDS if name not in callbacks)
        self._lock = threading.Lock()
        self._conn: Any = None
        self._born = _forks[0]
        self._should_reconnect: Callable[[], bool] | None = None

    def send(self, wire: tuple[Any, ...]) -> Any:
        """The reply to ``wire`` sent on the lane, or :data:`BUSY` when the request is not a
        script call or another thread holds the lane (nothing sent).  redis-py's exceptions
        propagate (the store maps them)."""
        if wire[0] not in self._commands or not self._lock.acquire(blocking=False):
            return BUSY
        try:
            conn = self._conn
            if conn is None or self._born != _forks[0]:
                conn = self._checkout()
            _ready(conn)
            try:
                pack = _pack
                conn.send_packed_command(
                    (pack(wire),) if pack is not None else conn.pack_command(*wire)
                )
                reply = conn.read_response()
            except ResponseError:
                raise  # an error reply, read whole: the connection is in step
            except BaseException:
                conn.disconnect()  # a reply may still be on its way: nobody may read it
                raise
            reconnect = self._should_reconnect
            if reconnect is not None and reconnect():
                conn.disconnect()  # the server asked for it (redis-py's maintenance events)
            return reply
        finally:
            self._lock.release()

    def _checkout(self) -> Any:
        """A connection of the pool, kept (after a fork: a new one, the parent's left alone)."""
        pool = self._pool
        try:
            conn = pool.get_connection()
        except TypeError:  # redis-py before 5.3 wants the command's name
            conn = pool.get_connection("EVALSHA")
        self._conn, self._born = conn, _forks[0]
        self._should_reconnect = getattr(conn, "should_reconnect", None)
        return conn

    def close(self) -> None:
        """Give the connection back to the pool (idempotent; a lane in use is left to the
        pool's own ``disconnect``)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            conn, self._conn = self._conn, None
            if conn is not None and self._born == _forks[0]:
                self._pool.release(conn)
        finally:
            self._lock.release()


def _ready(conn: Any) -> None:
    """The pool's own check before it hands a connection out (``ConnectionPool.get_connection``):
    nothing to read on it, else reconnected.  A failed reconnection raises inside redis-py's
    ``connect``; data on a fresh connection raises a message that says nothing was sent."""
    conn.connect()  # (connected: returns at once)
    try:
        if conn.can_read():
            raise ConnectionError("Connection has data")
    except (ConnectionError, TimeoutError, OSError):
        conn.disconnect()
        conn.connect()
        if conn.can_read():
            raise ConnectionError(
                "Error connecting to the server: a fresh connection holds unread data"
            ) from None
