"""What ``MongoStore`` and ``AsyncMongoStore`` share besides their driver: the client they
wrap, the settings and the plan (every contract method comes from
:class:`harel.store.common.PlanStore` / ``AsyncPlanStore``).  Imports no driver."""

from __future__ import annotations

from typing import Any, ClassVar, Unpack

from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.errors import StoreError

from harel_store_mongo._capabilities import CAPABILITIES
from harel_store_mongo._contract import MongoPlan
from harel_store_mongo._options import (
    DEFAULT_DB,
    DEFAULT_WRITE_CONCERN,
    StoreKnobs,
    check_db,
    check_knobs,
    check_trace_max,
    check_w,
    describe_client,
)
from harel_store_mongo._seq import HybridClock


def database_options(client: Any, w: int | str | None) -> dict[str, Any]:
    """What the store's database handle pins (see :mod:`harel_store_mongo._options`): primary
    reads always, and the write concern with ``w`` (``None``: the client's), keeping the
    client's ``j`` / ``wtimeout``."""
    from pymongo import ReadPreference, WriteConcern  # the store classes import PyMongo anyway

    options: dict[str, Any] = {"read_preference": ReadPreference.PRIMARY}
    if w is not None:
        current = getattr(getattr(client, "write_concern", None), "document", None)
        document = dict(current) if isinstance(current, dict) else {}
        document["w"] = w
        options["write_concern"] = WriteConcern(**document)
    return options


class MongoStoreBase:
    """The client, database, settings and plan of one store over one database."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    trace_max: int | None
    db: str
    where: str
    _plan: MongoPlan
    _client: Any
    _database: Any
    _owns_client: bool

    def __init__(self, client: Any, **knobs: Unpack[StoreKnobs]) -> None:
        """Wrap ``client``: check the knobs (:class:`~harel_store_mongo._options.StoreKnobs`)
        and bind its database (no IO here)."""
        knobs = check_knobs(knobs)
        self._client, self._database = client, None
        self._owns_client = knobs.get("owns_client", False)
        self.db = check_db(knobs.get("db", DEFAULT_DB))
        self.trace_max = check_trace_max(knobs.get("trace_max", DEFAULT_TRACE_MAX))
        self.where = knobs.get("where") or describe_client(client, self.db)
        clock = knobs.get("seq_clock")
        if clock is not None and not isinstance(clock, HybridClock):
            raise TypeError(f"seq_clock must be a HybridClock, got {type(clock).__name__}")
        self._plan = MongoPlan(self.where, clock)
        w = check_w(knobs.get("w", DEFAULT_WRITE_CONCERN))
        self._database = client.get_database(self.db, **database_options(client, w))

    def _release(self) -> Any:
        """Forget the client; the one to close (``None`` when the store does not own it or
        was closed already).  Later calls raise."""
        client = getattr(self, "_client", None)
        self._client = self._database = None
        return client if getattr(self, "_owns_client", False) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where})"

    def _closed(self) -> StoreError:
        return StoreError(f"the store over {self.where} is closed; open a new store")
