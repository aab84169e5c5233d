"""What the sync and async stores share: settings, the plan, the client slot, error mapping.

Everything here is driver-free; ``sync.py`` and ``aio.py`` add only how a request is sent
(blocking or awaited), the client's lifecycle and ``from_url``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harel.store.contract import Capabilities
from harel.store.errors import StoreUnavailable

from harel_store_dynamodb._errors import map_error
from harel_store_dynamodb._options import DynamoOptions
from harel_store_dynamodb._plan import Operations
from harel_store_dynamodb._plugin import CAPABILITIES
from harel_store_dynamodb._requests import Call


class DynamoStoreBase:
    """The state of one store object: its options, plan, client and whether it owns it."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    options: DynamoOptions
    trace_max: int | None
    _plan: Operations
    _client: Any
    _endpoint: str | None

    def _configure(self, options: DynamoOptions, client: Any, endpoint: str | None) -> None:
        """Set the options, the plan over the table and the client to send requests with."""
        self.options = options
        self.trace_max = options.trace_max
        self._plan = Operations(options.table)
        self._client = client
        self._endpoint = endpoint

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
