"""Store options: ``mongodb://`` / ``mongodb+srv://`` URLs, harel's knobs and their validation.

URL forms (the MongoDB connection string, plus harel's knobs in the query)::

    mongodb://[user:password@]host[:port][,host2[:port2],...][/[authdb]][?options]
    mongodb+srv://[user:password@]cluster.example.net[/[authdb]][?options]

harel's knobs (query parameters or keyword arguments of ``from_url``; keywords win):
``db`` (the database, default ``harel``), ``trace_max``, and ``connect_retries`` /
``retry_delay`` for the open's bounded retry.  Every other query parameter is a driver option
handed to PyMongo unchanged (``w``, ``journal``, ``readConcernLevel``, ``tls``,
``replicaSet``, ``authSource``, ``serverSelectionTimeoutMS``, ...); the path is MongoDB's
default authentication database, not the data's.  Nothing here imports PyMongo.

What correctness needs is pinned on the store's database handle, whatever the client says:

* every read the store makes (load, the sweeps, listing, the receipt probe after a lost CAS or
  reply) goes to the **primary**; ``readPreference=secondary*`` in the URL applies to the
  client's other users only (a secondary may lag: a stale load always loses its CAS, a stale
  probe could misreport a stored commit);
* writes use **``w: "majority"``** by default (with ``w: 1`` a replica set rolls back an
  acknowledged commit when its primary fails before replicating it); the URL's ``w=...`` (or the
  store keyword ``w``; ``None`` keeps the client's) overrides it, and the client's ``journal``
  / ``wtimeoutMS`` are kept.  ``w=0`` (unacknowledged) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypedDict
from urllib.parse import unquote_plus

from harel.store.common import RETRY_KNOBS, redact_url, retry_arguments, retry_knobs
from harel.store.common.urls import knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

SCHEMES = ("mongodb", "mongodb+srv")
DEFAULT_DB = "harel"
DEFAULT_CONNECT_RETRIES = 5
DEFAULT_RETRY_DELAY = 0.2
DEFAULT_WRITE_CONCERN = "majority"
"""The write concern's ``w`` unless the URL or the ``w`` keyword says otherwise."""
DEFAULT_SERVER_SELECTION_MS = 5000
"""How long one connect attempt waits for a server (PyMongo's own default is 30 s); applied
only when the URL does not set ``serverSelectionTimeoutMS``."""
APP_NAME = "harel"
"""Reported to the server (``appname``) unless the URL names another."""
_retry_arguments = partial(
    retry_arguments, default_retries=DEFAULT_CONNECT_RETRIES, default_delay=DEFAULT_RETRY_DELAY
)
"""``retry_arguments`` with this backend's defaults (``connect_retries=5``, ``retry_delay=0.2``)."""

STORE_KNOBS = frozenset({"db", "trace_max"})
"""Options of the store itself (URL query or keywords)."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of the open: how often and how patiently ``from_url`` retries."""
HAREL_KNOBS = STORE_KNOBS | CONNECT_KNOBS

_DB_FORBIDDEN = frozenset('/\\. "$*<>:|?\x00')
MAX_DB_BYTES = 63


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


def check_db(name: object) -> str:
    """A usable MongoDB database name (``ValueError`` naming the rule otherwise)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"db must be a non-empty str, got {name!r}")
    bad = sorted(set(name) & _DB_FORBIDDEN)
    if bad:
        raise ValueError(
            f"db {name!r} holds {''.join(bad)!r}; MongoDB database names cannot hold any of "
            '/ \\ . " $ * < > : | ? or a space'
        )
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"db {name!r} is not valid Unicode text") from None
    if size > MAX_DB_BYTES:
        raise ValueError(f"db {name!r} is longer than {MAX_DB_BYTES} bytes")
    return name


def check_w(w: object) -> int | str | None:
    """A usable write concern ``w``: ``None``, an int >= 1 or a non-empty tag (``"majority"``)."""
    if w is None or (isinstance(w, str) and w):
        return w
    if isinstance(w, int) and not isinstance(w, bool) and w >= 1:
        return w
    raise ValueError(
        f"w must be 'majority', a replica-set tag, an int >= 1 or None, got {w!r} "
        "(w=0 acknowledges nothing: a commit's outcome would never be known)"
    )


def check_trace_max(trace_max: object) -> int | None:
    """``trace_max`` itself when it is ``None`` or an int >= 0."""
    if trace_max is not None and (
        isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0
    ):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    return trace_max


@dataclass(frozen=True, slots=True)
class MongoOptions:
    """Validated settings of one store; ``repr`` and :attr:`where` never show a secret."""

    driver_uri: str = field(repr=False)
    """The connection string PyMongo gets: the URL without harel's knobs (credentials kept)."""
    shown: str
    """The URL as it may be shown (redacted, harel's knobs removed)."""
    db: str = DEFAULT_DB
    trace_max: int | None = DEFAULT_TRACE_MAX
    driver_options: frozenset[str] = frozenset()
    """The driver options the URL sets (lower-case names)."""

    @property
    def where(self) -> str:
        """Where the data lives, for messages: the servers and the database (no secrets)."""
        return f"MongoDB {self.shown} (database {self.db!r})"

    def store_kwargs(self) -> StoreKnobs:
        """The store constructors' keyword arguments besides the client (a store opened from
        a URL owns its client)."""
        knobs: StoreKnobs = {
            "db": self.db,
            "trace_max": self.trace_max,
            "owns_client": True,
            "where": self.where,
        }
        if "w" in self.driver_options:
            knobs["w"] = None  # the URL's own write concern
        return knobs

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``MongoClient`` / ``AsyncMongoClient`` besides the URI: harel's
        defaults for what the URL leaves unset."""
        kwargs: dict[str, Any] = {}
        if "serverselectiontimeoutms" not in self.driver_options:
            kwargs["serverSelectionTimeoutMS"] = DEFAULT_SERVER_SELECTION_MS
        if "appname" not in self.driver_options:
            kwargs["appname"] = APP_NAME
        return kwargs


@dataclass(frozen=True, slots=True)
class _Split:
    scheme: str
    credentials: str
    hosts: str
    authdb: str
    pairs: tuple[str, ...]


def _split(url: str) -> _Split:
    """Cut a connection string the way PyMongo does (hosts end at the first ``/``)."""
    shown = redact_url(url)
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURL(f"{shown} is not a MongoDB URL; use mongodb://host:27017/?db=harel")
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise InvalidStoreURL(
            f"{shown} is not a MongoDB URL; use mongodb://host:27017/?db=harel or "
            "mongodb+srv://cluster.example.net/?db=harel"
        )
    host_part, slash, path_part = rest.partition("/")
    if not slash and "?" in host_part:
        raise InvalidStoreURL(
            f"{shown}: a '/' must separate the hosts from the options "
            "(mongodb://host:27017/?db=harel)"
        )
    credentials, at, hosts = host_part.rpartition("@")
    if not hosts:
        raise InvalidStoreURL(f"{shown} names no host (mongodb://host:27017/?db=harel)")
    if "#" in path_part:
        raise InvalidStoreURL(f"{shown}: a MongoDB URL has no fragment ('#'); percent-encode it")
    authdb, _, query = path_part.partition("?")
    pairs = tuple(pair for pair in query.replace(";", "&").split("&") if pair)
    return _Split(scheme, credentials + at, hosts, authdb, pairs)


def parse_mongo_url(url: str, overrides: dict[str, Any]) -> tuple[MongoOptions, dict[str, Any]]:
    """``(options, connect knobs)`` of a URL; keyword ``overrides`` win over the URL's query.

    Raises :class:`InvalidStoreURL` for another scheme or a malformed harel knob, ``ValueError``
    / ``TypeError`` for a bad keyword (the password is never shown).
    """
    parts = _split(url)
    shown = redact_url(url)
    unknown = sorted(set(overrides) - HAREL_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a MongoDB store; allowed keywords: "
            f"{', '.join(sorted(HAREL_KNOBS))} (driver options go in the URL's query)"
        )
    knobs: dict[str, str] = {}
    driver_pairs: list[str] = []
    for pair in parts.pairs:
        raw_key, _, raw_value = pair.partition("=")
        key = unquote_plus(raw_key)
        if key in HAREL_KNOBS:
            if key in knobs:
                raise InvalidStoreURL(f"option {key!r} is given twice in {shown}")
            knobs[key] = unquote_plus(raw_value)
        else:
            driver_pairs.append(pair)
    store: dict[str, Any] = {}
    if "db" in knobs:
        store["db"] = knobs["db"]
    if "trace_max" in knobs:
        store["trace_max"] = knob_int(knobs, "trace_max", 0)
    connect = retry_knobs(knobs)
    store.update({k: v for k, v in overrides.items() if k in STORE_KNOBS})
    connect.update({k: v for k, v in overrides.items() if k in CONNECT_KNOBS})
    try:
        db = check_db(store.get("db", DEFAULT_DB))
    except ValueError as exc:
        raise InvalidStoreURL(f"{shown}: {exc}") from None
    query = "&".join(driver_pairs)
    base = f"{parts.scheme}://{parts.credentials}{parts.hosts}/{parts.authdb}"
    driver_uri = f"{base}?{query}" if query else base
    names = frozenset(unquote_plus(pair.partition("=")[0]).lower() for pair in driver_pairs)
    options = MongoOptions(
        driver_uri=driver_uri,
        shown=redact_url(driver_uri),
        db=db,
        trace_max=check_trace_max(store.get("trace_max", DEFAULT_TRACE_MAX)),
        driver_options=names,
    )
    return options, connect


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[MongoOptions, dict[str, Any]]:
    """``(options, retry arguments)`` of ``from_url``: the validated settings, and the keyword
    arguments of ``connect_with_retry`` / ``aconnect_with_retry`` (harel-core's
    ``retry_arguments``: retry only while the server is unreachable)."""
    options, connect = parse_mongo_url(url, knobs)
    return options, _retry_arguments(connect, what=options.where)


def with_db(url: str, db: str) -> str:
    """``url`` with its ``db`` knob set to ``db`` (other parts kept as written)."""
    parts = _split(url)
    pairs = [p for p in parts.pairs if unquote_plus(p.partition("=")[0]) != "db"]
    pairs.append(f"db={check_db(db)}")
    base = f"{parts.scheme}://{parts.credentials}{parts.hosts}/{parts.authdb}"
    return f"{base}?{'&'.join(pairs)}"


def describe_client(client: object, db: str) -> str:
    """Where an injected client's data lives, for messages (no IO, no credentials)."""
    return f"MongoDB database {db!r} through an injected {type(client).__name__}"
