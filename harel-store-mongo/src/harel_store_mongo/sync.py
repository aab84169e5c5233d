"""``MongoStore``: the synchronous MongoDB store over PyMongo.

Every contract method runs one plan of :mod:`harel_store_mongo._plan` through
:func:`harel.store.common.drive`; each request is one call on the client's collections, so the
store is as thread-safe as ``MongoClient`` (fully).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any, Self, TypeVar

import pymongo
from harel.model import Execution, ExecutionPage, Status
from harel.store import contract
from harel.store.common import connect_with_retry, drive

from harel_store_mongo._base import MongoStoreBase
from harel_store_mongo._calls import issue
from harel_store_mongo._errors import translate
from harel_store_mongo._options import DEFAULT_DB, MongoOptions, describe_client, from_url_args
from harel_store_mongo._plan import Plan
from harel_store_mongo._requests import Request

T = TypeVar("T")


class MongoStore(MongoStoreBase):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in MongoDB.

    Wraps a ``pymongo.MongoClient`` (or any client with its API, e.g. mongomock's); the caller
    keeps owning it unless ``owns_client=True``.  Opening reaches the server, checks the
    layout version in database ``db`` and creates the indexes.  Prefer :meth:`from_url`.
    """

    def __init__(
        self,
        client: Any,
        *,
        db: str = DEFAULT_DB,
        trace_max: int | None = contract.DEFAULT_TRACE_MAX,
        owns_client: bool = False,
        where: str | None = None,
    ) -> None:
        """``where`` names the data in messages (default: the database and the client type)."""
        self._client: Any = client
        self._owns_client = owns_client
        self._database: Any = None
        try:
            self._configure(db=db, trace_max=trace_max, where=where or describe_client(client, db))
            self._database = client.get_database(self.db)
            self._drive(self._open())
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``mongodb://host:27017/?db=harel`` or ``mongodb+srv://cluster/?db=harel``.

        An unreachable server is retried ``connect_retries`` times (default 5, backoff from
        ``retry_delay`` seconds) and then raises ``StoreUnavailable``.  Other knobs: see
        :mod:`harel_store_mongo._options`.
        """
        options, retry = from_url_args(url, knobs)
        return connect_with_retry(partial(cls._connect, options), **retry)

    @classmethod
    def _connect(cls, options: MongoOptions) -> Self:
        """One attempt of :meth:`from_url`: a new client and the open (which closes it on
        failure)."""
        with translate(options.where):
            client = pymongo.MongoClient(options.driver_uri, **options.client_kwargs())
        return cls(client, **options.store_kwargs(), owns_client=True, where=options.where)

    def _execute(self, request: Request) -> Any:
        database = self._database
        if database is None:
            raise self._closed()
        with translate(self.where):
            raw = issue(database, request)
            return list(raw) if request.cursor else raw

    def _drive(self, operation: Plan[T]) -> T:
        return drive(operation, self._execute)

    # -- the contract ---------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """A fresh copy of the stored execution, or ``None`` (one round trip)."""
        return self._drive(self._load(execution_id))

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``load`` plus whether ``event_id`` was already processed, in one round trip."""
        return self._drive(self._load_for_event(execution_id, event_id))

    def save(self, exe: Execution) -> None:
        """CAS-write the snapshot alone (``commit(exe, [])``)."""
        self.commit(exe, [])

    def commit(
        self,
        exe: Execution,
        emits: Sequence[contract.Emit],
        processed_event_id: str | None = None,
        timers: Sequence[contract.TimerOp] = (),
        spawns: Sequence[contract.Spawn] = (),
        trace: dict[str, Any] | None = None,
    ) -> None:
        """Write one step with one ``update_one``: all of it, or nothing and ``exe.version``
        back."""
        with self._prepare(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            self._drive(self._commit(prepared))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether that execution already processed that event."""
        return self._drive(self._is_processed(execution_id, event_id))

    def pending_outbox(self, *, limit: int | None = None) -> list[contract.OutboxEntry]:
        """Undelivered events, oldest first (at most ``limit``)."""
        return self._drive(self._pending_outbox(limit))

    def ack_outbox(self, seq: int) -> None:
        """Forget a delivered event (unknown seq: no-op)."""
        self._drive(self._ack(seq, spawns=False))

    def pending_spawns(self, *, limit: int | None = None) -> list[contract.SpawnEntry]:
        """Uncreated children, oldest first (at most ``limit``)."""
        return self._drive(self._pending_spawns(limit))

    def ack_spawn(self, seq: int) -> None:
        """Forget a created child's intent (unknown seq: no-op)."""
        self._drive(self._ack(seq, spawns=True))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[contract.DueTimer]:
        """Armed timers with ``fire_at <= now``, ascending by ``(fire_at, execution_id, path)``."""
        return self._drive(self._due_timers(now, limit))

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Disarm a timer only if it still holds exactly ``fire_at`` (one guarded update)."""
        self._drive(self._delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first, each with its ``index``."""
        return self._drive(self._read_trace(execution_id))

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append a step atomically; unknown execution raises ``ExecutionNotFound``."""
        self._drive(self._append_trace(execution_id, entry))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of summaries ordered by id (keyset cursor, indexed, no snapshot read)."""
        return self._drive(self._list(status, definition_id, roots_only, limit, cursor))

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all it owns; whether it was stored."""
        return self._drive(self._purge(execution_id, force))

    def prune_processed(
        self, older_than: float, *, batch_size: int = contract.DEFAULT_PRUNE_BATCH
    ) -> int:
        """Drop dedupe marks recorded before ``older_than``, in short single-document writes."""
        return self._drive(self._prune(older_than, batch_size))

    def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client, self._client, self._database = self._client, None, None
        if client is not None and self._owns_client:
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
