"""The MongoDB backend as core's registry and URL parsing see it; imports no PyMongo.

URLs: ``mongodb://[user:password@]host[:port][,host2[:port2],...][/[authdb]][?options]`` and
``mongodb+srv://[user:password@]cluster.example.net[/[authdb]][?options]``.  harel's knobs
(``db``, ``w``, ``trace_max``, ``connect_retries`` / ``retry_delay``) ride in the query or as
``from_url`` keywords (keywords win); every other query parameter is a driver option handed to
PyMongo as written.  The path is MongoDB's authentication database, not the data's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote, unquote_plus, urlencode

from harel.store.author import RETRY_KNOBS, BackendSpec, Knob, StoreURL, redact_url, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL, StoreConfigError

SCHEMES = ("mongodb", "mongodb+srv")
FORMS = ("mongodb://host:27017/?db=harel", "mongodb+srv://cluster.example.net/?db=harel")
LEGACY_VARS = ("STM_MONGO_URL", "STM_MONGO_DB")
_DB_FORBIDDEN = frozenset('/\\. "$*<>:|?\x00')
T = TypeVar("T")


def _cut(url: str) -> tuple[str, str, str, str, list[tuple[str, str]]]:
    """``(scheme://authority/authdb, credentials, hosts, authdb, [(key, pair)])`` as written,
    cut the way PyMongo cuts a connection string (the hosts end at the first ``/``)."""
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    credentials, _, hosts = authority.rpartition("@")
    if not slash and "?" in authority:
        problem = f"a '/' must separate the hosts from the options ({FORMS[0]})"
    elif not hosts:
        problem = f"it names no host ({FORMS[0]})"
    elif "#" in tail:
        problem = "a MongoDB URL has no fragment ('#'); percent-encode it"
    else:
        authdb, _, query = tail.partition("?")
        texts = [text for text in query.replace(";", "&").split("&") if text]
        pairs = [(unquote_plus(text.partition("=")[0]), text) for text in texts]
        return f"{scheme.lower()}://{authority}/{authdb}", credentials, hosts, authdb, pairs
    raise InvalidStoreURL(f"{redact_url(url)}: {problem}")


def _parse(url: str) -> StoreURL:
    """The spec's parser: ``host`` holds the host list text, ``path`` the authentication
    database; a driver option may repeat (``readPreferenceTags``), a harel knob may not."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURL(f"{redact_url(url)} is not a MongoDB URL; use {' or '.join(FORMS)}")
    scheme = url.partition("://")[0].lower()
    if scheme not in SCHEMES:  # the spec refuses it, naming the URL forms
        return StoreURL(scheme, None, None, None, None, "", {}, url)
    _, credentials, hosts, authdb, pairs = _cut(url)
    query: dict[str, str] = {}
    for key, pair in pairs:
        if key in query and (key in SPEC.by_name or key in RETRY_KNOBS):
            raise InvalidStoreURL(f"option {key!r} is given twice in {redact_url(url)}")
        query[key] = unquote_plus(pair.partition("=")[2])
    user, colon, password = (unquote(part) for part in credentials.partition(":"))
    return StoreURL(
        scheme, user or None, password if colon else None, hosts, None, f"/{authdb}", query, url
    )


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The driver's URI: the URL without harel's knobs (``parsed.query`` holds the rest)."""
    base, *_, pairs = _cut(parsed.raw)
    kept = "&".join(pair for key, pair in pairs if key in parsed.query)
    names = frozenset(name.lower() for name in parsed.query)
    return {"driver_uri": f"{base}?{kept}" if kept else base, "driver_options": names}


def check_db(name: str) -> str:
    """``name`` when MongoDB can name a database so (:class:`InvalidStoreOption` otherwise)."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        size = 0
    if not 0 < size <= 63 or set(name) & _DB_FORBIDDEN:
        raise InvalidStoreOption(
            f"option db={name!r} must be a MongoDB database name: 1 to 63 bytes of UTF-8 "
            'without / \\ . " $ * < > : | ? or a space'
        )
    return name


def check_w(w: T) -> T:
    """``w`` when usable as the write concern's ``w``: ``None``, a count >= 1 (an int, or
    digits in text) or a non-empty tag (``"majority"``); :class:`InvalidStoreOption` else."""
    count = int(w) if isinstance(w, str) and w.strip().lstrip("-").isdigit() else w
    if count is None or (isinstance(count, str) and count) or (type(count) is int and count > 0):
        return w
    raise InvalidStoreOption(
        f"option w={w!r} must be 'majority', a replica-set tag, an int >= 1 or None "
        "(w=0 acknowledges nothing: a commit's outcome would never be known)"
    )


SPEC = BackendSpec(
    name="mongo",
    title="MongoDB",
    schemes=SCHEMES,
    url_forms=FORMS,
    store="harel_store_mongo.sync:MongoStore",
    async_store="harel_store_mongo.aio:AsyncMongoStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution="harel-store-mongo",
    location=_location,
    parser=_parse,
    passthrough_any=True,
    knobs=(
        Knob("db", str, "harel", check=check_db, doc="the database holding the collections"),
        Knob(
            "w",
            str,
            "majority",
            aliases=("W",),
            optional=True,
            check=check_w,
            doc="the store's write concern",
        ),
        trace_max_knob(),
    ),
    retry=(5, 0.2),
    legacy_env="harel_store_mongo._spec:url_from_env",
    legacy_vars=LEGACY_VARS,
    harness="harel_store_mongo.testing:harness_from_url",
    local_url="mongodb://mongomock.invalid/",
    exists="harel_store_mongo._exists:store_exists",
    description="MongoDB (PyMongo; async over AsyncMongoClient or motor): one update_one per "
    "commit",
)
"""The backend's declaration; the ``harel.stores`` entry point names it.  ``w``: the store's
write concern (``majority``, a tag or a count; ``none``: the client's; ``0`` is refused).
``local_url``'s reserved host makes the harness use mongomock (in-process: it claims neither
persistent nor multi_process); ``HAREL_TEST_MONGO_URL`` points the tests at a real server."""
CAPABILITIES = SPEC.capabilities
"""A server's data, shared by any number of processes (a commit is one single-document update
with the version CAS in its filter), keyset listing over ``_id`` with exact pages."""


@dataclass(frozen=True, slots=True)
class MongoOptions:
    """Validated settings of a store opened from a URL: ``driver_uri`` is the URL without
    harel's knobs (credentials kept; ``repr`` and :attr:`where` never show a secret),
    ``driver_options`` the lower-case names of the driver options it sets."""

    driver_uri: str = field(repr=False)
    driver_options: frozenset[str]
    db: str
    w: str | None
    trace_max: int | None

    @property
    def where(self) -> str:
        """Where the data lives, for messages: the servers and the database (no secrets)."""
        return f"MongoDB {redact_url(self.driver_uri)} (database {self.db!r})"

    def store_kwargs(self) -> dict[str, Any]:
        """The store constructors' keywords besides the client (the store owns it)."""
        knobs = {"db": self.db, "trace_max": self.trace_max, "w": self.w, "where": self.where}
        return {**knobs, "owns_client": True}

    def client_kwargs(self) -> dict[str, Any]:
        """``MongoClient`` / ``AsyncMongoClient`` keywords besides the URI: a 5 s server
        selection (PyMongo's: 30 s) and ``appname=harel``, unless the URL sets them."""
        defaults = {"serverSelectionTimeoutMS": 5000, "appname": "harel"}
        return {k: v for k, v in defaults.items() if k.lower() not in self.driver_options}


def make_options(url: str, **knobs: Any) -> MongoOptions:
    """The settings ``url`` and ``knobs`` name (keywords win), checked against :data:`SPEC`
    (``InvalidStoreURL`` / ``InvalidStoreOption``, no secret shown)."""
    return MongoOptions(**SPEC.open_args(url, knobs).arguments)


def with_db(url: str, db: str) -> str:
    """``url`` with its ``db`` knob set to ``db`` (other parts kept as written)."""
    base, *_, pairs = _cut(url)
    kept = [pair for key, pair in pairs if key != "db"]
    return f"{base}?{'&'.join([*kept, urlencode({'db': check_db(db)})])}"


def url_from_env(env: Mapping[str, str]) -> str | None:
    """``STM_MONGO_URL`` with ``STM_MONGO_DB`` as its ``db`` (replacing the URL's); ``None``
    when neither is set; ``STM_MONGO_DB`` alone or unusable raises :class:`StoreConfigError`."""
    url, db = ((env.get(name) or "").strip() or None for name in LEGACY_VARS)
    if url is None and db is not None:
        raise StoreConfigError(
            "STM_MONGO_DB is set but STM_MONGO_URL is not: set STM_MONGO_URL="
            "mongodb://host:27017 (or STM_STORE_URL=mongodb://host:27017/?db=...)"
        )
    try:
        return url if url is None or db is None else with_db(url, db)
    except ValueError as exc:
        raise StoreConfigError(f"STM_MONGO_DB: {exc}") from None
