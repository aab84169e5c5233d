"""The MongoDB backend as core's registry and URL parsing see it; imports no PyMongo.

URLs: ``mongodb://[user:password@]host[:port][,host2[:port2],...][/[authdb]][?options]`` and
``mongodb+srv://[user:password@]cluster.example.net[/[authdb]][?options]``.  harel's knobs
(``db``, ``w``, ``trace_max``, ``connect_retries`` / ``retry_delay``) ride in the query or as
``from_url`` keywords (keywords win); every other query parameter is a driver option handed to
PyMongo as written.  The path is MongoDB's authentication database, not the data's.
"""

from __future__ import annotations

from typing import Any, TypeVar
from urllib.parse import unquote, unquote_plus

from harel.store.author import RETRY_KNOBS, BackendSpec, Knob, StoreURL, redact_url, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

from harel_store_mongo._uri import FORMS, cut

SCHEMES = ("mongodb", "mongodb+srv")
LEGACY_VARS = ("STM_MONGO_URL", "STM_MONGO_DB")
_DB_FORBIDDEN = frozenset('/\\. "$*<>:|?\x00')
T = TypeVar("T")


def _parse(url: str) -> StoreURL:
    """The spec's parser: ``host`` holds the host list text, ``path`` the authentication
    database; a driver option may repeat (``readPreferenceTags``), a harel knob may not."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURL(f"{redact_url(url)} is not a MongoDB URL; use {' or '.join(FORMS)}")
    scheme = url.partition("://")[0].lower()
    if scheme not in SCHEMES:  # the spec refuses it, naming the URL forms
        return StoreURL(scheme, None, None, None, None, "", {}, url)
    _, credentials, hosts, authdb, pairs = cut(url)
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
    base, *_, pairs = cut(parsed.raw)
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
    legacy_env="harel_store_mongo._legacy:url_from_env",
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
