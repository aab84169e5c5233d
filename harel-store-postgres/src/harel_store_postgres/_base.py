"""What the sync and the async store both hold, whatever their driver."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from harel.store.contract import Capabilities

from harel_store_postgres._conn import Renderer
from harel_store_postgres._options import PostgresOptions
from harel_store_postgres._plan import PLAN, PostgresPlan
from harel_store_postgres._spec import CAPABILITIES

PoolT = TypeVar("PoolT")


class PooledStore(Generic[PoolT]):
    """The options, ring size, plan, connection pool and statement renderer of one store."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    trace_max: int | None
    _plan: PostgresPlan

    def __init__(self, pool: PoolT, options: PostgresOptions) -> None:
        """Wrap an opened pool over a schema that holds the current layout (use ``open``)."""
        self.options = options
        self.trace_max = options.trace_max
        self._plan = PLAN
        self._pool = pool
        self._render = Renderer(options.schema)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options.where!r}, schema={self.options.schema!r})"
