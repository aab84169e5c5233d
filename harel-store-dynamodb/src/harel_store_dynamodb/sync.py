"""``DynamoDBStore``: the synchronous store over a boto3 DynamoDB client.

The store owns its client unless one is injected (then closing the store leaves it open).
boto3 clients are thread-safe, so threads may share one store; every operation is a plan of
:mod:`harel_store_dynamodb._plan` driven by :func:`harel.store.common.drive`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

import boto3  # type: ignore[import-untyped, unused-ignore]
from harel.model import Execution, ExecutionPage, Status
from harel.store.common import committing, connect_with_retry, drive, listing_query
from harel.store.contract import (
    DEFAULT_PRUNE_BATCH,
    DEFAULT_TRACE_MAX,
    Capabilities,
    DueTimer,
    Emit,
    OutboxEntry,
    Spawn,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._client import client_arguments, endpoint_of
from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._options import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT,
    DynamoOptions,
    make_options,
    retry_settings,
    split_from_url_knobs,
)
from harel_store_dynamodb._plan import Operations, Plan
from harel_store_dynamodb._plugin import CAPABILITIES
from harel_store_dynamodb._requests import Pause, Request
from harel_store_dynamodb._schema import OUTBOX, SPAWNS

_SESSIONS: dict[str | None, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def open_client(options: DynamoOptions, endpoint: str | None) -> Any:
    """A boto3 DynamoDB client (sessions are shared per profile, so models load once)."""
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(options.profile)
        if session is None:
            session = boto3.session.Session(profile_name=options.profile)
            _SESSIONS[options.profile] = session
        return session.client("dynamodb", **client_arguments(options, endpoint))


class DynamoDBStore:
    """A durable :class:`~harel.store.contract.ExecutionStore` in one DynamoDB table.

    ``table`` is created on first use when ``create_table=True`` (and waited for until
    ACTIVE); otherwise it must exist with the layout of :mod:`harel_store_dynamodb._schema`.
    See :mod:`harel_store_dynamodb._options` for the other settings.  ``client`` injects a
    boto3 DynamoDB client that the caller owns.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(
        self,
        table: str,
        *,
        client: Any = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        local: bool | str = False,
        create_table: bool = False,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        request_timeout: float = DEFAULT_TIMEOUT,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        profile: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
    ) -> None:
        self.options = make_options(
            table,
            region=region,
            endpoint_url=endpoint_url,
            local=local,
            create_table=create_table,
            trace_max=trace_max,
            request_timeout=request_timeout,
            max_attempts=max_attempts,
            profile=profile,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
        )
        self.trace_max = self.options.trace_max
        self._ops = Operations(self.options.table)
        self._owns = client is None
        self._endpoint = endpoint_of(self.options) if client is None else None
        self._client: Any = (
            client if client is not None else open_client(self.options, self._endpoint)
        )
        try:
            self._run(
                self._ops.open(self.options.create_table, self.options.describe(self._endpoint))
            )
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``dynamodb://TABLE?region=...`` (see :mod:`harel_store_dynamodb._options`).

        Retries ``connect_retries`` times (backoff from ``retry_delay``) while the endpoint
        cannot be reached, then raises :class:`~harel.store.errors.StoreUnavailable`.
        """
        table, store_knobs, connect = split_from_url_knobs(url, knobs)
        retries, delay = retry_settings(connect)
        return connect_with_retry(
            lambda: cls(table, **store_knobs),
            retries=retries,
            delay=delay,
            retry_on=(StoreUnavailable,),
            what=f"DynamoDB table {table!r}",
        )

    def __repr__(self) -> str:
        return f"DynamoDBStore({self.options.describe(self._endpoint)!r})"

    # -- the drive loop --------------------------------------------------------------------------

    def _execute(self, request: Request) -> Any:
        if isinstance(request, Pause):
            time.sleep(request.seconds)
            return None
        client = self._client
        if client is None:
            raise StoreUnavailable(f"{self!r} is closed; open a new store")
        try:
            return getattr(client, request.operation)(**request.params)
        except Exception as exc:
            mapped = map_error(exc, table=self.options.table, operation=request.operation)
            if mapped is exc:
                raise
            raise mapped from exc

    def _run(self, plan: Plan) -> Any:
        return drive(plan, self._execute)

    # -- the contract ----------------------------------------------------------------------------

    def load(self, execution_id: str) -> Execution | None:
        """The stored execution (a strongly consistent read), or ``None``."""
        return self._run(self._ops.load(execution_id))  # type: ignore[no-any-return]

    def load_for_event(self, execution_id: str, event_id: str) -> tuple[Execution | None, bool]:
        """``(execution, already processed?)`` in one consistent ``BatchGetItem``."""
        return self._run(self._ops.load_for_event(execution_id, event_id))  # type: ignore[no-any-return]

    def save(self, exe: Execution) -> None:
        """``commit(exe, [])``."""
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
        """Write the step in one ``TransactWriteItems`` with the version CAS (all or nothing)."""
        with committing(exe, emits, processed_event_id, timers, spawns, trace) as prepared:
            self._run(self._ops.commit(prepared, self.trace_max))

    def is_processed(self, execution_id: str, event_id: str) -> bool:
        """Whether the dedupe mark exists (consistent read)."""
        return self._run(self._ops.is_processed(execution_id, event_id))  # type: ignore[no-any-return]

    def pending_outbox(self, *, limit: int | None = None) -> list[OutboxEntry]:
        """Undelivered entries by ascending ``seq`` (a query of the sparse relay index)."""
        return self._run(self._ops.pending(OUTBOX, limit))  # type: ignore[no-any-return]

    def ack_outbox(self, seq: int) -> None:
        """Remove outbox entry ``seq`` (no-op when unknown)."""
        self._run(self._ops.ack(OUTBOX, seq))

    def pending_spawns(self, *, limit: int | None = None) -> list[SpawnEntry]:
        """Undelivered spawn intents by ascending ``seq``."""
        return self._run(self._ops.pending(SPAWNS, limit))  # type: ignore[no-any-return]

    def ack_spawn(self, seq: int) -> None:
        """Remove spawn intent ``seq`` (no-op when unknown)."""
        self._run(self._ops.ack(SPAWNS, seq))

    def due_timers(self, now: float, *, limit: int | None = None) -> list[DueTimer]:
        """Armed timers with ``fire_at <= now`` (a query of the sparse timer index)."""
        return self._run(self._ops.due_timers(now, limit))  # type: ignore[no-any-return]

    def delete_timer(self, execution_id: str, path: str, fire_at: float) -> None:
        """Remove the timer only while it still holds exactly ``fire_at``."""
        self._run(self._ops.delete_timer(execution_id, path, fire_at))

    def read_trace(self, execution_id: str) -> list[dict[str, Any]]:
        """The retained trace steps, oldest first."""
        return self._run(self._ops.read_trace(execution_id))  # type: ignore[no-any-return]

    def append_trace(self, execution_id: str, entry: dict[str, Any]) -> None:
        """Append one step outside a commit (``ExecutionNotFound`` for an unknown id)."""
        self._run(self._ops.append_trace(execution_id, entry, self.trace_max))

    def list_executions(
        self,
        *,
        status: Iterable[Status] | None = None,
        definition_id: str | None = None,
        roots_only: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page ordered by id, from a listing index (keyset cursor)."""
        query = listing_query(
            status=status,
            definition_id=definition_id,
            roots_only=roots_only,
            limit=limit,
            cursor=cursor,
        )
        return self._run(self._ops.list_executions(query))  # type: ignore[no-any-return]

    def purge(self, execution_id: str, *, force: bool = False) -> bool:
        """Remove the execution and all it owns; ``ExecutionActive`` unless finished or forced."""
        return self._run(self._ops.purge(execution_id, force))  # type: ignore[no-any-return]

    def prune_processed(self, older_than: float, *, batch_size: int = DEFAULT_PRUNE_BATCH) -> int:
        """Drop dedupe marks recorded before ``older_than``; returns how many."""
        return self._run(self._ops.prune_processed(older_than, batch_size))  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the client if this store created it (idempotent)."""
        client, self._client = self._client, None
        if client is not None and self._owns:
            client.close()
