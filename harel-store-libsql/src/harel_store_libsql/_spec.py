"""The libSQL backend as core's registry and URL parsing see it; imports no driver.

Three modes: a local **file** (``libsql+file:///relative.db``, ``libsql+file:////abs/path.db``,
``libsql+file:///:memory:``), a **server** (``libsql://host``: HTTPS, ``?tls=false``: HTTP) and
an embedded **replica** (a file with ``?sync_url=`` its primary).  Knobs ride as query
parameters or keyword arguments (keywords win); the auth token is never shown.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from harel.store.author import BackendSpec, Knob, StoreURL, memory_alias, trace_max_knob
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

from harel_store_libsql._modes import check_server, check_token

DISTRIBUTION = "harel-store-libsql"
FILE_SCHEME, SERVER_SCHEME = "libsql+file", "libsql"
FORMS = ("libsql+file:///relative.db", "libsql+file:////absolute/path.db", "libsql://host")
TLS = Knob("tls", bool, True, doc="libsql:// URLs only: false speaks plain HTTP (a local sqld)")


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The constructor's ``database``: a ``libsql+file://`` URL's file, or the ``https://``
    (``?tls=false``: ``http://``) server of a ``libsql://`` URL."""
    shown, forms = parsed.redacted, ", ".join((*FORMS[:2], "libsql+file:///:memory:"))
    if parsed.scheme == FILE_SCHEME:
        if parsed.host or parsed.port or parsed.username:
            raise InvalidStoreURL(
                f"{shown!r} names a host, but libsql+file URLs have none: write three slashes "
                f"before the path ({forms}); a server is libsql://host"
            )
        if "tls" in parsed.query:
            raise InvalidStoreOption(f"option tls is for libsql:// server URLs, not {shown!r}")
        database = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
        if not database:
            raise InvalidStoreURL(f"{shown!r} names no database file; use {forms}")
        return {"database": database}
    check_server(parsed.raw.partition("?")[0], "server URL")  # a file is libsql+file:///path.db
    tls = TLS.from_text(parsed.query["tls"]) if "tls" in parsed.query else TLS.default
    host = parsed.host or ""
    host = f"[{host}]" if ":" in host else host
    port = "" if parsed.port is None else f":{parsed.port}"
    return {"database": f"{'https' if tls else 'http'}://{host}{port}"}


def _retry(parsed: StoreURL, knobs: dict[str, Any]) -> tuple[int, float]:
    """5 retries for a server or a replica (a ``sync_url``), none for a file."""
    remote = parsed.scheme == SERVER_SCHEME or knobs["sync_url"] is not None
    return (5, 0.5) if remote else (0, 0.5)


def _rules(values: dict[str, Any]) -> None:
    """The rule across knobs: ``sync_interval`` paces a replica, so it needs ``sync_url``."""
    if values["sync_interval"] is not None and values["sync_url"] is None:
        raise InvalidStoreOption("sync_interval needs sync_url (it paces an embedded replica)")


SPEC = BackendSpec(
    name="libsql",
    title="libSQL",
    schemes=(SERVER_SCHEME, FILE_SCHEME),
    url_forms=FORMS,
    store="harel_store_libsql.sync:LibsqlStore",
    async_store="harel_store_libsql.aio:AsyncLibsqlStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution=DISTRIBUTION,
    location=_location,
    normalize=memory_alias(FILE_SCHEME),  # libsql+file://:memory: too
    knobs=(
        trace_max_knob(),
        Knob(
            "auth_token",
            str,
            None,
            optional=True,
            secret=True,
            aliases=("authToken",),
            check=check_token,
            doc="bearer token of the server or the replica's primary",
        ),
        Knob(
            "sync_url",
            str,
            None,
            optional=True,
            check=partial(check_server, what="sync_url"),
            doc="makes a local file an embedded replica of this primary",
        ),
        Knob("sync_interval", float, None, above=0, optional=True, doc="replica pull seconds"),
        Knob("busy_timeout_ms", int, 5000, minimum=0, doc="local: wait for a writer's lock"),
        Knob(
            "synchronous",
            str,
            "FULL",
            choices=("FULL", "NORMAL", "EXTRA"),
            doc="local: FULL survives power loss, NORMAL a process crash; OFF is not offered",
        ),
    ),
    passthrough=frozenset({TLS.name}),
    check=_rules,
    retry_for=_retry,
    legacy_env="harel_store_libsql._legacy:url_from_env",
    legacy_vars=("STM_LIBSQL_DB", "STM_LIBSQL_SYNC_URL", "STM_LIBSQL_AUTH_TOKEN"),
    harness="harel_store_libsql.testing:harness_from_url",
    local_url="libsql+file:///{workdir}/harel-libsql.db",
    exists="harel_store_libsql._exists:store_exists",
    description="libSQL (libsql driver): local file, sqld/Turso server or embedded replica; "
    "async over one worker thread",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""Durable (a file, or a server), safe across processes (file locks locally; the server orders
writes), keyset listing by id, exact pages."""


def parse_libsql_url(url: str) -> tuple[str, dict[str, Any]]:
    """The ``database`` and the store knobs (typed; retry knobs left out) a URL names."""
    parsed, knobs, _retry = SPEC.parse_url(url)
    return _location(parsed)["database"], knobs
