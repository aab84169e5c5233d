"""``DynamoDBStore``: the synchronous store over a boto3 DynamoDB client.

Every contract method is :class:`harel.store.author.PlanStore`'s, running one plan of
:class:`~harel_store_dynamodb._plan.Operations` through :func:`harel.store.author.drive`.
The store owns its client unless one is injected (then closing the store leaves it open).
boto3 clients are thread-safe, so threads may share one store.
"""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, Self, TypeVar

import boto3  # type: ignore[import-untyped, unused-ignore]
from harel.store.author import BackendSpec, FromUrl, PlanStore, connect_with_retry, drive

from harel_store_dynamodb._base import DynamoStoreBase, legacy_create_args
from harel_store_dynamodb._client import client_arguments, endpoint_of
from harel_store_dynamodb._legacy import DEFAULT_TABLE
from harel_store_dynamodb._options import DynamoOptions, make_options
from harel_store_dynamodb._plan import Operations, Plan
from harel_store_dynamodb._requests import Pause, Request
from harel_store_dynamodb._spec import SPEC

T = TypeVar("T")
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


class DynamoDBStore(FromUrl, DynamoStoreBase, PlanStore[Operations]):
    """A durable :class:`~harel.store.contract.ExecutionStore` in one DynamoDB table.

    ``table`` is created on first use when ``create_table=True`` (and waited for until
    ACTIVE); otherwise it must exist with the layout of :mod:`harel_store_dynamodb._schema`.
    The other settings are the knobs of :data:`~harel_store_dynamodb._spec.SPEC` (and the
    README).  ``client`` injects a boto3 DynamoDB client that the caller owns.
    :meth:`from_url` opens ``dynamodb://TABLE?region=...``, retrying (``connect_retries``,
    ``retry_delay``) while the endpoint cannot be reached, then raises ``StoreUnavailable``.
    The reference implementation's forms work too: ``DynamoDBStore(boto3_client,
    prefix="harel")`` (the client positional, ``prefix`` naming the table, created when
    missing) and :meth:`create`.
    """

    spec: ClassVar[BackendSpec] = SPEC

    def __init__(
        self,
        table: Any = DEFAULT_TABLE,
        client: Any = None,
        *,
        prefix: str | None = None,
        **knobs: Any,
    ) -> None:
        if not isinstance(table, str) and client is None:
            # the reference implementation's form: DynamoDBStore(boto3_client, prefix="harel")
            # (it created its tables on construction; here prefix names the one table)
            client, table = table, prefix or DEFAULT_TABLE
            knobs.setdefault("create_table", True)
        elif prefix is not None:
            raise TypeError("prefix= goes with DynamoDBStore(client, prefix=...); give table")
        options = make_options(table, **knobs)
        self._owns = client is None
        endpoint = endpoint_of(options) if client is None else None
        self._configure(
            options,
            client if client is not None else open_client(options, endpoint),
            endpoint,
            injected=client is not None,
        )
        try:
            self._run(self._open_plan())
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(cls, table: str | None = None, **knobs: Any) -> Self:
        """The reference implementation's factory, ``create(endpoint_url=None,
        region="us-east-1", prefix="harel", connect_retries=30, retry_delay=1.0)``: opens
        (creating when missing) the table ``prefix`` with connect retries; any other keyword
        is this store's (see :func:`._base.legacy_create_args`)."""
        name, store_knobs, retry = legacy_create_args(table, knobs)
        return connect_with_retry(lambda: cls(name, **store_knobs), **retry)

    def _execute(self, request: Request) -> Any:
        if isinstance(request, Pause):
            time.sleep(request.seconds)
            return None
        method = self._method(request)
        try:
            return method(**request.params)
        except Exception as exc:
            raise self._translate(exc, request)  # noqa: B904 (chained by _translate)

    def _run(self, operation: Plan) -> Any:
        """Drive one plan; every driver exception is mapped to :mod:`harel.store.errors`."""
        return drive(operation, self._execute)

    def close(self) -> None:
        """Close the client if this store created it (idempotent)."""
        client, self._client = self._client, None
        if client is not None and self._owns:
            client.close()
