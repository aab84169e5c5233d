"""The SQLite backend as core's registry and URL parsing see it; imports no ``sqlite3``.

URL forms (the path after the third slash is the file): ``sqlite:///relative.db`` (relative to
the working directory at open time), ``sqlite:////abs/path.db`` (percent-encode unusual
characters), ``sqlite:///:memory:`` (also ``sqlite://:memory:``: a private in-memory database).
Knobs ride as query parameters or keyword arguments (keywords win); ``connect_retries`` /
``retry_delay`` (``from_url`` only) retry an open that finds the file locked.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import BackendSpec, Knob, LegacyEnv, StoreURL, memory_alias, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreURL

DISTRIBUTION = "harel-store-sqlite"
FORMS = ("sqlite:///relative.db", "sqlite:////absolute/path.db", "sqlite:///:memory:")


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The file a ``sqlite://`` URL names (it has no host part)."""
    if parsed.host or parsed.port or parsed.username:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} names a host, but SQLite URLs have none: write three slashes "
            "before the path (sqlite:///relative.db, sqlite:////absolute/path.db)"
        )
    path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    if not path:
        raise InvalidStoreURL(f"{parsed.redacted!r} names no database file; use {', '.join(FORMS)}")
    return {"path": path}


SPEC = BackendSpec(
    name="sqlite",
    title="SQLite",
    schemes=("sqlite",),
    url_forms=FORMS,
    store="harel_store_sqlite.sync:SqliteStore",
    async_store="harel_store_sqlite.aio:AsyncSqliteStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution=DISTRIBUTION,
    location=_location,
    normalize=memory_alias("sqlite"),  # sqlite://:memory: too
    knobs=(
        trace_max_knob(),
        Knob("busy_timeout_ms", int, 5000, minimum=0, doc="wait for another writer's lock"),
        Knob(
            "synchronous",
            str,
            "FULL",
            choices=("FULL", "NORMAL", "EXTRA"),
            doc="FULL survives power loss; NORMAL (WAL) a process crash; OFF is not offered",
        ),
    ),
    legacy=LegacyEnv(path_var="STM_STORE_DB", template="sqlite:///{}"),
    harness="harel_store_sqlite.testing:harness_from_url",
    local_url="sqlite:///{workdir}/harel.db",
    exists="harel_store_sqlite._exists:store_exists",
    description="SQLite file (stdlib sqlite3; async over one worker thread), WAL",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""Durable file, safe across processes (SQLite file locks), keyset listing by id, exact pages."""


def parse_sqlite_url(url: str) -> tuple[str, dict[str, Any]]:
    """The file and the store knobs (typed; retry knobs left out) a ``sqlite://`` URL names."""
    parsed, knobs, _retry = SPEC.parse_url(url)
    return _location(parsed)["path"], knobs
