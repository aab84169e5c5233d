"""The libSQL backend as core's registry and URL parsing see it; imports no driver.

Three modes: a local **file** (``libsql+file:///relative.db``, ``libsql+file:////abs/path.db``,
``libsql+file:///:memory:``), a **server** (``libsql://host``: HTTPS, ``?tls=false``: HTTP) and
an embedded **replica** (a file with ``?sync_url=`` its primary).  Knobs ride as query
parameters or keyword arguments (keywords win); the auth token is never shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from harel.store.author import (
    BackendSpec,
    Knob,
    StoreURL,
    memory_alias,
    parse_store_url,
    redact_url,
    trace_max_knob,
)
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

MEMORY = ":memory:"
DISTRIBUTION = "harel-store-libsql"
FILE_SCHEME, SERVER_SCHEME = "libsql+file", "libsql"
REMOTE_SCHEMES = ("libsql", "https", "http")
"""How a server URL may be spelled as a ``database`` or a ``sync_url`` (``libsql`` = HTTPS)."""
FORMS = ("libsql+file:///relative.db", "libsql+file:////absolute/path.db", "libsql://host")
TLS = Knob("tls", bool, True, doc="libsql:// URLs only: false speaks plain HTTP (a local sqld)")
Mode = Literal["file", "server", "replica"]


def _server(url: str, what: str) -> str:
    """``url`` if the driver can use it as a server: ``libsql``/``https``/``http``, a host, no
    credentials, path or query (the token travels as ``auth_token``, never in a URL)."""
    parsed = parse_store_url(url)
    shown = parsed.redacted
    if parsed.scheme not in REMOTE_SCHEMES:
        raise InvalidStoreOption(f"{what} {shown} must be a libsql://, https:// or http:// URL")
    if parsed.username is not None or parsed.password is not None:
        raise InvalidStoreOption(f"{what} {shown} holds credentials; pass the token as auth_token")
    if not parsed.host:
        raise InvalidStoreOption(f"{what} {shown} names no server; use libsql://host[:port]")
    if parsed.query or "#" in url or parsed.path not in ("", "/"):
        raise InvalidStoreOption(f"{what} {shown} must be scheme://host[:port] only (no path)")
    return url


def _token(token: str) -> str | None:
    """The token (``""``: none), refused unshown if it holds whitespace or control characters."""
    if any(char.isspace() or ord(char) < 32 for char in token):
        raise InvalidStoreOption(
            "option auth_token holds whitespace or control characters (value not shown)"
        )
    return token or None


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
    _server(parsed.raw.partition("?")[0], "server URL")  # a file is libsql+file:///path.db
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
            check=_token,
            doc="bearer token of the server or the replica's primary",
        ),
        Knob(
            "sync_url",
            str,
            None,
            optional=True,
            check=partial(_server, what="sync_url"),
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


@dataclass(frozen=True, slots=True)
class LibsqlOptions:
    """Validated settings of one store (build it with :func:`make_options`); ``repr`` and
    :attr:`where` never show the token."""

    database: str
    auth_token: str | None = field(repr=False)
    sync_url: str | None
    sync_interval: float | None
    trace_max: int | None
    busy_timeout_ms: int
    synchronous: str

    @property
    def mode(self) -> Mode:
        """``"server"`` (``database`` is a URL), ``"replica"`` (``sync_url``) or ``"file"``."""
        scheme, sep, _rest = self.database.partition("://")
        if sep and scheme.lower() in REMOTE_SCHEMES:
            return "server"
        return "file" if self.sync_url is None else "replica"

    @property
    def local(self) -> bool:
        """Whether the engine runs in-process on a local file (file, replica)."""
        return self.mode != "server"

    @property
    def in_memory(self) -> bool:
        """A private in-memory database (no WAL, nothing persists)."""
        return self.database == MEMORY

    @property
    def where(self) -> str:
        """The database as named in messages (no secret)."""
        if self.mode == "server":
            return f"libSQL server {redact_url(self.database)}"
        if self.sync_url is not None:
            return f"libSQL replica {self.database!r} of {redact_url(self.sync_url)}"
        return f"libSQL database {self.database!r}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings no message may show (the token), for scrubbing driver messages."""
        return (self.auth_token,) if self.auth_token else ()

    def connect_kwargs(self) -> dict[str, Any]:
        """``libsql.connect``'s keywords besides the database: autocommit (every transaction is
        the plan's own ``BEGIN IMMEDIATE``), busy timeout 0 (the store waits for locks)."""
        kwargs: dict[str, Any] = {"isolation_level": None, "_check_same_thread": False}
        if self.local:
            kwargs["timeout"] = 0.0
        driver = ("auth_token", "sync_url", "sync_interval")
        kwargs.update((name, v) for name in driver if (v := getattr(self, name)) is not None)
        return kwargs


def make_options(database: str, **knobs: Any) -> LibsqlOptions:
    """The settings of ``database`` (a file, ``:memory:``, a server URL) with ``knobs``, each
    checked against :data:`SPEC`, and the mode's rules (``InvalidStoreURL`` /
    ``InvalidStoreOption`` naming the problem, never the token)."""
    if not isinstance(database, str) or not database:
        shown = redact_url(database) if isinstance(database, str) else repr(database)
        raise InvalidStoreURL(f"database must be a file, ':memory:' or a server URL, not {shown}")
    options = LibsqlOptions(database, **SPEC.knob_values(knobs))
    if options.mode == "server":
        _server(database, "database")
        local = ("busy_timeout_ms", "synchronous", "sync_url")  # sync_interval needs sync_url
        given = [name for name in local if getattr(options, name) != SPEC.defaults[name]]
        if given:
            raise InvalidStoreOption(
                f"{', '.join(given)}: for a local file or replica only; a libSQL server "
                "manages its own locking, durability and replication"
            )
    elif "://" in database:
        raise InvalidStoreURL(
            f"database {redact_url(database)} is neither a local file nor a "
            "libsql://, https:// or http:// server URL"
        )
    elif options.sync_url is not None and options.in_memory:
        raise InvalidStoreOption("an embedded replica needs a local file, not ':memory:'")
    elif options.auth_token is not None and options.sync_url is None:
        raise InvalidStoreOption(
            "auth_token is for a libSQL server or a replica's sync_url; a local file takes none"
        )
    return options


def parse_libsql_url(url: str) -> tuple[str, dict[str, Any]]:
    """The ``database`` and the store knobs (typed; retry knobs left out) a URL names."""
    parsed, knobs, _retry = SPEC.parse_url(url)
    return _location(parsed)["database"], knobs
