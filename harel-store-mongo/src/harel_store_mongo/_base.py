"""What ``MongoStore`` and ``AsyncMongoStore`` share besides their driver: the client they
wrap, the settings and the plan (every contract method comes from
:class:`harel.store.author.PlanStore` / ``AsyncPlanStore``).  Imports no driver."""

from __future__ import annotations

from typing import Any, ClassVar, Self, TypedDict, Unpack

from harel.store.contract import Capabilities
from harel.store.errors import StoreError

from harel_store_mongo._options import MongoOptions
from harel_store_mongo._plan import MongoPlan
from harel_store_mongo._seq import HybridClock
from harel_store_mongo._spec import CAPABILITIES, SPEC, check_w


class StoreKnobs(TypedDict, total=False):
    """The store constructors' keyword arguments besides the client, all optional: ``db``
    (default ``harel``), ``trace_max`` (default 200), ``owns_client`` (default ``False``: the
    caller closes the client), ``where`` (names the data in messages; default: the database
    and the client type), ``w`` (the write concern's ``w``, default ``"majority"``; ``None``
    keeps the client's), ``seq_clock`` (the hybrid clock seqs come from,
    :class:`harel_store_mongo._seq.HybridClock`; default: the one every store of the process
    shares — tests pass their own to play machines whose clocks disagree)."""

    db: str
    trace_max: int | None
    owns_client: bool
    where: str | None
    w: int | str | None
    seq_clock: Any


def check_knobs(knobs: StoreKnobs) -> StoreKnobs:
    """``knobs``, or ``TypeError`` naming a keyword the constructors do not take."""
    unknown = sorted(set(knobs) - set(StoreKnobs.__annotations__))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; the store takes "
            f"{', '.join(StoreKnobs.__annotations__)}"
        )
    return knobs


def database_options(client: Any, w: int | str | None) -> dict[str, Any]:
    """What the store's database handle pins, whatever the client says: primary reads always,
    and the write concern with ``w`` (checked by :func:`~harel_store_mongo._spec.check_w`;
    ``None``: the client's), keeping the client's ``j`` / ``wtimeout``.

    Every read the store makes (load, the sweeps, listing, the receipt probe after a lost CAS
    or reply) goes to the **primary**; ``readPreference=secondary*`` in the URL applies to the
    client's other users only (a secondary may lag: a stale load always loses its CAS, a stale
    probe could misreport a stored commit).  Writes use ``w: "majority"`` by default (with
    ``w: 1`` a replica set rolls back an acknowledged commit when its primary fails before
    replicating it); ``w=0`` (unacknowledged) is refused.
    """
    from pymongo import ReadPreference, WriteConcern  # the store classes import PyMongo anyway

    options: dict[str, Any] = {"read_preference": ReadPreference.PRIMARY}
    if w is not None:
        current = getattr(getattr(client, "write_concern", None), "document", None)
        document = dict(current) if isinstance(current, dict) else {}
        document["w"] = int(w) if isinstance(w, str) and w.strip().isdigit() else w  # a count
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
        """Wrap ``client``: check the knobs (:class:`StoreKnobs`; ``db`` and ``trace_max`` as
        :data:`~harel_store_mongo._spec.SPEC` declares them) and bind its database (no IO)."""
        knobs = check_knobs(knobs)
        self._client, self._database = client, None
        self._owns_client = knobs.get("owns_client", False)
        db, trace_max = SPEC.by_name["db"], SPEC.by_name["trace_max"]
        self.db = db.validate(knobs.get("db", db.default))
        self.trace_max = trace_max.validate(knobs.get("trace_max", trace_max.default))
        clock = knobs.get("seq_clock")
        if clock is not None and not isinstance(clock, HybridClock):
            raise TypeError(f"seq_clock must be a HybridClock, got {type(clock).__name__}")
        self._bind(knobs.get("where"), clock, check_w(knobs.get("w", SPEC.by_name["w"].default)))

    def _adopt(self, client: Any, options: MongoOptions) -> None:
        """``__init__`` for ``from_url``: the store owns ``client``, and ``options`` were
        checked by :data:`~harel_store_mongo._spec.SPEC` already, so nothing is checked again."""
        self._client, self._database, self._owns_client = client, None, True
        self.db, self.trace_max = options.db, options.trace_max
        self._bind(options.where, None, options.w)

    @classmethod
    def _adopted(cls, client: Any, options: MongoOptions) -> Self:
        """A store made by :meth:`_adopt` (no IO)."""
        store = cls.__new__(cls)
        store._adopt(client, options)
        return store

    def _bind(self, where: str | None, clock: HybridClock | None, w: int | str | None) -> None:
        client = self._client
        self.where = where or (
            f"MongoDB database {self.db!r} through an injected {type(client).__name__}"
        )
        self._plan = MongoPlan(self.where, clock)
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
