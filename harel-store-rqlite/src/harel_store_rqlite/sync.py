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
from collections.abc import Generator, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar, Self, TypeVar, Unpack

import httpx
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import committing, connect_with_retry, drive
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)

from harel_store_rqlite._http import client_settings, live, send
from harel_store_rqlite._options import (
    DEFAULT_URL,
    RqliteKnobs,
    RqliteOptions,
    from_url_args,
    make_options,
)
from harel_store_rqlite._plan import list_page, open_store, rqlite_plan
from harel_store_rqlite._plugin import CAPABILITIES
from harel_store_rqlite._wire import Request, Wire

T = TypeVar("T")


class RqliteStore:
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` on an rqlite cluster.

    ``url`` names a node (``rqlite://[user:password@]host:4001`` or ``rqlites://...``); the
    knobs are described in :class:`~harel_store_rqlite._options.RqliteKnobs`.  The
    constructor makes one attempt to reach the node and check (create, upgrade) the schema;
    :meth:`from_url` retries until the node is up and has a leader.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    options: RqliteOptions
    """The validated settings."""
    trace_max: int | None
    """Trace steps kept per execution (``None``: unbounded); settable."""

    def __init__(self, url: str = DEFAULT_URL, **knobs: Unpack[RqliteKnobs]) -> None:
        self._setup(make_options(url, **knobs))
        try:
            self._run(open_store(self._plan, time.time()))
        except BaseException:
            self.close()
            raise

    def _setup(self, options: RqliteOptions) -> None:
        self.options = options
        self.trace_max = options.trace_max
        self._wire = Wire(options)
        self._plan = rqlite_plan(options)
        self._client: httpx.Client | None = httpx.Client(**client_settings(options))

    @classmethod
    def unopened(cls, url: str, **knobs: Unpack[RqliteKnobs]) -> Self:
        """A store that has sent nothing yet: no readiness or schema check (for test
        harnesses and tools that inspect or drop a database; the contract methods need the
        schema, so use the constructor or :meth:`from_url` otherwise)."""
        store = cls.__new__(cls)
        store._setup(make_options(url, **knobs))
        return store

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``rqlite://host:4001`` / ``rqlites://...``, retrying (``connect_retries``,
        ``retry_delay``: backoff with jitter) while the node is unreachable or has no leader,
        then ``StoreUnavailable``.  Other knobs: those of the constructor (keywords win)."""
        url, store_knobs, retry = from_url_args(url, knobs)
        return connect_with_retry(lambda: cls(url, **store_knobs), **retry)

    def __repr__(self) -> str:
        return f"RqliteStore({self.options.base_url!r})"

    def _run(self, operation: Generator[Request, Any, T], level: str | None = None) -> T:
        """Drive one plan operation, its reads at ``level`` (default: the ``level`` knob)."""
        call = partial(send, live(self._client, operation, self.options), self.options)

        def execute(request: Request) -> Any:
            return drive(self._wire.run(request, level), call)

        return drive(operation, execute)

    # -- the contract ---------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None`` (one read)."""
        return self._run(self._plan.load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one read."""
        return self._run(self._plan.load_for_event(execution_id, event_id))

    def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        self.commit(exe, [])

    def commit(
        self,
        exe: Execution,
        emits: Sequence[Emit],
        processed_event_id: str | None = None,
        timers: Sequence[TimerOp] = (),
        spawns: Sequence[Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step in ONE request: all of it, or nothing and ``exe.version`` restored."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            self._run(self._plan.commit(prepared, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._run(self._plan.is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``; read at ``sweep_level``)."""
        return self._run(self._plan.pending_outbox(limit), self.options.sweep_level)

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._run(self._plan.ack_outbox(seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``; read at ``sweep_level``)."""
        return self._run(self._plan.pending_spawns(limit), self.options.sweep_level)

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._run(self._plan.ack_spawn(seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending (read at ``sweep_level``)."""
        return self._run(self._plan.due_timers(now, limit), self.options.sweep_level)

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at``."""
        self._run(self._plan.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._run(self._plan.read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step in one request; an unknown execution raises ``ExecutionNotFound``."""
        self._run(self._plan.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id (an index-served keyset probe, ``sweep_level``)."""
        page = list_page(self._plan, status, definition_id, roots_only, limit, cursor)
        return self._run(page, self.options.sweep_level)

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Delete the execution and all it owns in one request (``ExecutionActive`` while it is
        not finished, unless ``force``); whether it existed."""
        return self._run(self._plan.purge(execution_id, force))

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``, ``batch_size`` per request."""
        return self._run(self._plan.prune_processed(older_than, batch_size))

    def close(self) -> None:
        """Close the HTTP client (idempotent); later calls raise ``StoreError``."""
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
