"""``RqliteStore``: the synchronous rqlite store over ``httpx.Client``.

One HTTP client (a keep-alive connection pool) per store; it is thread-safe, and rqlite
serialises writes through its leader, so threads share a store without a lock.  Every write
transaction is one request (a commit: one ``/db/request?transaction``), so there is no
transaction to leave open.

This module owns only the client's lifecycle and the drive loop: what each operation sends is
the SQL family's plan (``_plan.py``) put on the wire by ``_wire.py``; errors are mapped by
``_errors.py``.  ``AsyncRqliteStore`` (``aio.py``) runs this store's methods whole in a worker
thread of its own.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from functools import partial
from typing import Any, ClassVar, Self, TypeVar

import httpx
from harel.store.author import connect_with_retry, drive
from harel.store.author.sql import SqlContract, SqlOp
from harel.store.contract import Capabilities

from harel_store_rqlite._http import client_settings, live, send
from harel_store_rqlite._options import RqliteOptions, make_options, open_options
from harel_store_rqlite._plan import cas_forms, open_store, rqlite_plan, verified_statements
from harel_store_rqlite._spec import CAPABILITIES, DEFAULT_URL
from harel_store_rqlite._wire import Request, Wire

T = TypeVar("T")


class RqliteStore(SqlContract):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` on an rqlite cluster.

    ``url`` names a node (``rqlite://[user:password@]host:4001`` or ``rqlites://...``); the
    knobs are declared in :data:`~harel_store_rqlite._spec.SPEC` (and the README).  The
    constructor makes one attempt to reach the node and check (create, upgrade) the schema;
    :meth:`from_url` retries (``connect_retries``, ``retry_delay``) until the node is up and
    has a leader, then raises ``StoreUnavailable``.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    options: RqliteOptions
    """The validated settings."""
    trace_max: int | None
    """Trace steps kept per execution (``None``: unbounded); settable."""

    def __init__(self, url: str = DEFAULT_URL, **knobs: Any) -> None:
        self._setup(make_options(url, **knobs))
        self._open()

    def _open(self) -> None:
        try:
            self._run(open_store(self._plan, time.time(), self.options))
        except BaseException:
            self.close()
            raise

    def _setup(self, options: RqliteOptions) -> None:
        self.options = options
        self.trace_max = options.trace_max
        self._plan = rqlite_plan(options)
        self._wire = Wire(options, verified_statements(self._plan), cas_forms(self._plan))
        self._client: httpx.Client | None = httpx.Client(**client_settings(options))

    @classmethod
    def unopened(cls, url: str, **knobs: Any) -> Self:
        """A store that has sent nothing yet: no readiness or schema check (for test
        harnesses and tools that inspect or drop a database; the contract methods need the
        schema, so use the constructor or :meth:`from_url` otherwise)."""
        return cls._unopened(make_options(url, **knobs))

    @classmethod
    def _unopened(cls, options: RqliteOptions) -> Self:
        store = cls.__new__(cls)
        store._setup(options)
        return store

    @classmethod
    def _opened(cls, options: RqliteOptions) -> Self:
        """The constructor's store over ``options`` already checked (``from_url``'s path)."""
        store = cls._unopened(options)
        store._open()
        return store

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open the node ``url`` names (keyword knobs win over the URL's), its URL parsed
        once; ``connect_retries`` / ``retry_delay`` retry while the node is unreachable or
        has no leader."""
        options, retry = open_options(url, knobs)
        return connect_with_retry(partial(cls._opened, options), **retry)

    def __repr__(self) -> str:
        return f"RqliteStore({self.options.base_url!r})"

    def _run(self, operation: Generator[Request, Any, T], level: str | None = None) -> T:
        """Drive one plan operation, its reads at ``level`` (default: the ``level`` knob)."""
        call = partial(send, live(self._client, operation, self.options), self.options)

        def execute(request: Request) -> Any:
            return drive(self._wire.run(request, level), call)

        return drive(operation, execute)

    def _sweep(self, operation: SqlOp[T]) -> T:
        """Sweeps and listings read at the ``sweep_level`` knob."""
        return self._run(operation, self.options.sweep_level)

    def close(self) -> None:
        """Close the HTTP client (idempotent); later calls raise ``StoreError``."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
