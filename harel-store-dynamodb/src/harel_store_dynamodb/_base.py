"""What the sync and async stores share: settings, the plan, the client slot, error mapping.

Everything here is driver-free; ``sync.py`` and ``aio.py`` add only how a request is sent
(blocking or awaited), the client's lifecycle and ``from_url``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harel.store.author import RETRY_KNOBS, retry_arguments
from harel.store.contract import Capabilities
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._legacy import DEFAULT_TABLE
from harel_store_dynamodb._options import DynamoOptions
from harel_store_dynamodb._plan import Operations, Plan
from harel_store_dynamodb._requests import Call
from harel_store_dynamodb._spec import CAPABILITIES
from harel_store_dynamodb._table import CheckKey


def legacy_create_args(
    table: str | None, knobs: dict[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(table, store knobs, retry arguments)`` for the reference implementation's
    ``create(endpoint_url=None, region="us-east-1", prefix="harel", connect_retries=30,
    retry_delay=1.0)``: ``prefix`` names the table (default ``harel``), an ``endpoint_url``
    means a local server (dummy credentials), and the table is created when missing, as the
    reference did; the other keywords are this store's."""
    knobs = dict(knobs)
    prefix = knobs.pop("prefix", None)
    table = table or prefix or DEFAULT_TABLE
    knobs.setdefault("region", "us-east-1")
    if knobs.get("endpoint_url") is not None:
        knobs.setdefault("local", True)
    knobs.setdefault("create_table", True)
    connect = {name: knobs.pop(name) for name in RETRY_KNOBS if name in knobs}
    retry = retry_arguments(
        connect, what=f"DynamoDB table {table!r}", default_retries=30, default_delay=1.0
    )
    return table, knobs, retry


class DynamoStoreBase:
    """The state of one store object: its options, plan, client and whether it owns it."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    options: DynamoOptions
    trace_max: int | None
    _plan: Operations
    _client: Any
    _endpoint: str | None

    def _configure(
        self, options: DynamoOptions, client: Any, endpoint: str | None, *, injected: bool
    ) -> None:
        """Set the options, the plan over the table and the client to send requests with."""
        self.options = options
        self.trace_max = options.trace_max
        self._plan = Operations(options.table)
        self._client = client
        self._endpoint = endpoint
        self._injected = injected

    def _open_plan(self) -> Plan:
        """The plan that checks the table (once per table, endpoint, region and injected
        client per process) and adopts its index shard count."""
        return self._plan.open(
            self.options.create_table, self._check_key(), self.options.index_shards
        )

    def _check_key(self) -> CheckKey:
        """What a table check is valid for: the endpoint and region the client really talks
        to (read from the client, so an injected one counts too) and an injected client's
        identity."""
        meta = getattr(self._client, "meta", None)
        endpoint = (
            getattr(meta, "endpoint_url", None) or self._endpoint or self.options.endpoint_url
        )
        region = getattr(meta, "region_name", None) or self.options.region_name
        return (
            self.options.table,
            str(endpoint),
            str(region),
            id(self._client) if self._injected else None,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options.describe(self._endpoint)!r})"

    def _method(self, request: Call) -> Any:
        """The client method that sends ``request`` (``StoreUnavailable`` once closed)."""
        client = self._client
        if client is None:
            raise StoreUnavailable(f"{self!r} is closed; open a new store")
        return getattr(client, request.operation)

    def _translate(self, exc: Exception, request: Call) -> Exception:
        """The typed error for a failed request (``exc`` chained), or ``exc`` itself."""
        mapped = map_error(exc, table=self.options.table, operation=request.operation)
        if mapped is exc or not isinstance(mapped, Exception):
            return exc
        mapped.__cause__ = exc
        mapped.__suppress_context__ = True
        return mapped
