"""Store options: constructor knobs, their validation, and ``libsql://`` / ``libsql+file://`` URLs.

Three modes, chosen by what the store opens:

* **file** — a local database file run by libSQL's embedded engine (or ``:memory:``);
* **server** — a remote primary (``sqld``, Turso) over HTTP(S), with an optional auth token;
* **replica** — an embedded replica: a local file that reads locally and forwards writes to
  the primary named by ``sync_url`` (with the auth token), pulling its changes.

URL forms (knobs ride as query parameters or keyword arguments; keywords win)::

    libsql+file:///relative.db            a file, relative to the working directory at open
    libsql+file:////abs/path.db           an absolute file (percent-encode unusual characters)
    libsql+file:///:memory:               a private in-memory database (libsql+file://:memory:)
    libsql+file:///replica.db?sync_url=https://db.example.com&auth_token=...
                                          an embedded replica of that primary
    libsql://db.example.com?auth_token=...          a server over HTTPS
    libsql://127.0.0.1:8080?tls=false               a server over plain HTTP (a local sqld)

The auth token is a secret: it never appears in a ``repr``, a message or a log line (``repr``
hides it, every URL shown goes through :func:`harel.store.common.redact_url`).  Nothing here
imports the driver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from harel.store.common import parse_store_url, redact_url, retry_arguments
from harel.store.common.retry import RETRY_KNOBS, retry_knobs
from harel.store.common.trace import trace_keep_from
from harel.store.common.urls import knob_bool, knob_choice, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

MEMORY = ":memory:"
FILE_SCHEME = "libsql+file"
SERVER_SCHEME = "libsql"
REMOTE_SCHEMES = ("libsql", "https", "http")
"""How a server URL may be spelled as a ``database`` or a ``sync_url`` (``libsql`` = HTTPS)."""
SYNCHRONOUS_CHOICES = ("FULL", "NORMAL", "EXTRA")
"""``OFF`` is deliberately not offered: it can lose committed steps on an OS crash."""
DEFAULT_BUSY_TIMEOUT_MS = 5000
DEFAULT_REMOTE_RETRIES = 5
"""``from_url`` retries of a server or replica that is not reachable yet (0 for a file)."""
DEFAULT_RETRY_DELAY = 0.5

LOCAL_KNOBS = frozenset({"busy_timeout_ms", "synchronous"})
"""Knobs of the local engine (file and replica modes only)."""
REPLICA_KNOBS = frozenset({"sync_url", "sync_interval"})
KNOBS = frozenset({"trace_max", "auth_token", *LOCAL_KNOBS, *REPLICA_KNOBS})
"""Keyword knobs of the constructor (and of ``from_url``)."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of ``from_url`` (URL query or keywords) that shape the open itself (bounded
retries, validated by harel-core's ``retry_arguments``)."""
FILE_URL_KNOBS = KNOBS | {"authToken"} | CONNECT_KNOBS
SERVER_URL_KNOBS = frozenset({"trace_max", "auth_token", "authToken", "tls"}) | CONNECT_KNOBS

Mode = Literal["file", "server", "replica"]


class LibsqlKnobs(TypedDict, total=False):
    """The keyword knobs of ``LibsqlStore`` / ``AsyncLibsqlStore.open``.

    * ``trace_max`` — trace steps kept per execution (0 or ``None``: no limit; default 200);
    * ``auth_token`` — the token of the server or of the replica's primary (a secret);
    * ``sync_url`` — makes a local file an embedded replica of this primary (``libsql://``,
      ``https://`` or ``http://``);
    * ``sync_interval`` — seconds between the replica's background pulls (default: the
      driver's; the store also pulls after every lost CAS);
    * ``busy_timeout_ms`` — how long a local write waits for another connection's write lock
      before raising ``StoreUnavailable`` (default 5000; the wait sleeps without holding the
      GIL);
    * ``synchronous`` — ``FULL`` (default) / ``NORMAL`` / ``EXTRA`` for a local file, as for
      SQLite.
    """

    trace_max: int | None
    auth_token: str | None
    sync_url: str | None
    sync_interval: float | None
    busy_timeout_ms: int
    synchronous: str


@dataclass(frozen=True, slots=True)
class LibsqlOptions:
    """Validated settings of one store; ``repr`` and :attr:`where` never show the token."""

    database: str
    auth_token: str | None = field(default=None, repr=False)
    sync_url: str | None = None
    sync_interval: float | None = None
    trace_max: int | None = DEFAULT_TRACE_MAX
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    synchronous: str = "FULL"

    @property
    def mode(self) -> Mode:
        """``"server"`` (``database`` is a URL), ``"replica"`` (a file with a ``sync_url``) or
        ``"file"``."""
        if _is_url(self.database):
            return "server"
        return "file" if self.sync_url is None else "replica"

    @property
    def local(self) -> bool:
        """Whether this connection runs the engine in-process on a local file (file, replica)."""
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
        """The keyword arguments of ``libsql.connect`` besides the database (autocommit mode:
        every transaction is the plan's own ``BEGIN IMMEDIATE``; the driver's busy timeout is 0
        because the store waits for locks itself)."""
        kwargs: dict[str, Any] = {"isolation_level": None, "_check_same_thread": False}
        if self.local:
            kwargs["timeout"] = 0.0
        if self.auth_token is not None:
            kwargs["auth_token"] = self.auth_token
        if self.sync_url is not None:
            kwargs["sync_url"] = self.sync_url
        if self.sync_interval is not None:
            kwargs["sync_interval"] = self.sync_interval
        return kwargs


def _is_url(database: str) -> bool:
    scheme, sep, _rest = database.partition("://")
    return bool(sep) and scheme.lower() in REMOTE_SCHEMES


def make_options(database: str, **knobs: Any) -> LibsqlOptions:
    """Validate constructor arguments (``ValueError``/``TypeError`` name the bad one; a secret
    is never shown)."""
    unknown = sorted(set(knobs) - KNOBS)
    if unknown:
        raise TypeError(f"unknown libSQL store option(s): {', '.join(unknown)}")
    if not isinstance(database, str) or not database:
        raise ValueError(
            "database must be a non-empty str (a file, ':memory:', or a libsql:// / https:// "
            f"server URL), got {redact_url(database) if isinstance(database, str) else database!r}"
        )
    trace_max = knobs.get("trace_max", DEFAULT_TRACE_MAX)
    trace_keep_from(0, trace_max)  # raises ValueError for anything but None or an int >= 0
    token = _token(knobs.get("auth_token"))
    sync_url = knobs.get("sync_url")
    sync_interval = knobs.get("sync_interval")
    server = _is_url(database)
    if server:
        _check_server_url(database, "database")
        given = sorted(LOCAL_KNOBS & set(knobs))
        if given or sync_url is not None or sync_interval is not None:
            raise ValueError(
                f"{', '.join(given) or 'sync_url/sync_interval'} apply to a local file or replica "
                "only; a libSQL server manages its own locking, durability and replication"
            )
    elif "://" in database:
        raise ValueError(
            f"database {redact_url(database)} is neither a local file nor a libsql://, https:// "
            "or http:// server URL"
        )
    if sync_url is not None:
        if not isinstance(sync_url, str):
            raise TypeError(f"sync_url must be a str, got {type(sync_url).__name__}")
        _check_server_url(sync_url, "sync_url")
        if database == MEMORY:
            raise ValueError("an embedded replica needs a local file, not ':memory:'")
    if sync_interval is not None:
        if sync_url is None:
            raise ValueError("sync_interval needs sync_url (it paces an embedded replica)")
        sync_interval = _positive_seconds(sync_interval)
    if token is not None and not server and sync_url is None:
        raise ValueError(
            "auth_token is for a libSQL server or a replica's sync_url; a local file takes none"
        )
    busy_timeout_ms = _int("busy_timeout_ms", knobs.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS))
    synchronous = knobs.get("synchronous", "FULL")
    if not isinstance(synchronous, str) or synchronous.upper() not in SYNCHRONOUS_CHOICES:
        raise ValueError(
            f"synchronous must be one of {', '.join(SYNCHRONOUS_CHOICES)}, got {synchronous!r}"
        )
    return LibsqlOptions(
        database=database,
        auth_token=token,
        sync_url=sync_url,
        sync_interval=sync_interval,
        trace_max=trace_max,
        busy_timeout_ms=busy_timeout_ms,
        synchronous=synchronous.upper(),
    )


def _token(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise TypeError(f"auth_token must be a str, got {type(value).__name__}")
    if any(char.isspace() or ord(char) < 32 for char in value):
        raise ValueError("auth_token holds whitespace or control characters (value not shown)")
    return value


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _positive_seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"sync_interval must be a number of seconds, got {value!r}")
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"sync_interval must be a finite number of seconds > 0, got {value!r}")
    return seconds


def _check_server_url(url: str, what: str) -> None:
    """A server URL the driver can use: ``libsql``/``https``/``http``, a host, no credentials,
    query or fragment (the token travels as ``auth_token``, never inside a URL)."""
    parsed = parse_store_url(url)
    shown = parsed.redacted
    if parsed.scheme not in REMOTE_SCHEMES:
        raise ValueError(f"{what} {shown} must be a libsql://, https:// or http:// URL")
    if parsed.username is not None or parsed.password is not None:
        raise ValueError(
            f"{what} {shown} holds credentials; pass the token as auth_token instead (it is "
            "sent as a bearer token, never as part of a URL)"
        )
    if not parsed.host:
        raise ValueError(f"{what} {shown} names no host")
    if parsed.query or "#" in url or parsed.path not in ("", "/"):
        raise ValueError(f"{what} {shown} must be scheme://host[:port] only (no path or query)")


def parse_libsql_url(url: str) -> tuple[str, dict[str, Any]]:
    """The ``database`` argument and the URL's store knobs (typed) of a ``libsql+file://`` or
    ``libsql://`` URL (its ``connect_retries`` / ``retry_delay`` are checked but left out: they
    only shape ``from_url``).

    Raises :class:`InvalidStoreURL` for another scheme, a malformed part, an unknown knob or a
    bad value; the token is never shown.
    """
    database, knobs, _connect = _parse_url(url)
    return database, knobs


def _parse_url(url: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(database, store knobs, connect knobs)`` of a libSQL URL, all typed."""
    if isinstance(url, str) and url.split("?", 1)[0].lower() == "libsql+file://:memory:":
        url = "libsql+file:///:memory:" + url[len("libsql+file://:memory:") :]
    parsed = parse_store_url(url)
    shown = parsed.redacted
    if parsed.scheme == FILE_SCHEME:
        database, knobs = _file_url(parsed.host, parsed.port, parsed.username, parsed.path, shown)
        query = parsed.knobs(FILE_URL_KNOBS)
    elif parsed.scheme == SERVER_SCHEME:
        query = parsed.knobs(SERVER_URL_KNOBS)
        database, knobs = _server_url(parsed.host, parsed.port, parsed.path, query, shown)
        if parsed.username is not None or parsed.password is not None:
            raise InvalidStoreURL(
                f"{shown!r} holds credentials before the host; pass the token as "
                "?auth_token=... instead"
            )
    else:
        raise InvalidStoreURL(
            f"{shown!r} is not a libSQL URL; use libsql+file:///relative.db, "
            "libsql+file:////absolute/path.db, libsql+file:///:memory: or libsql://host"
        )
    knobs.update(_query_knobs(query, shown))
    return database, knobs, retry_knobs(query)


def _file_url(
    host: str | None, port: int | None, username: str | None, path: str, shown: str
) -> tuple[str, dict[str, Any]]:
    if host or port or username:
        raise InvalidStoreURL(
            f"{shown!r} names a host, but libsql+file URLs have none: write three slashes "
            "before the path (libsql+file:///relative.db, libsql+file:////absolute/path.db); "
            "a server is libsql://host"
        )
    database = path[1:] if path.startswith("/") else path
    if not database:
        raise InvalidStoreURL(
            f"{shown!r} names no database file; use libsql+file:///relative.db, "
            "libsql+file:////absolute/path.db or libsql+file:///:memory:"
        )
    return database, {}


def _server_url(
    host: str | None, port: int | None, path: str, query: dict[str, str], shown: str
) -> tuple[str, dict[str, Any]]:
    if not host:
        raise InvalidStoreURL(f"{shown!r} names no server; use libsql://host[:port]")
    if path not in ("", "/"):
        raise InvalidStoreURL(
            f"{shown!r} has a path; a libSQL server URL is libsql://host[:port] (a local file "
            "is libsql+file:///path.db)"
        )
    tls = knob_bool(query, "tls", True)
    name = f"[{host}]" if ":" in host else host
    netloc = name if port is None else f"{name}:{port}"
    return f"{'https' if tls else 'http'}://{netloc}", {}


def _query_knobs(query: dict[str, str], shown: str) -> dict[str, Any]:
    knobs: dict[str, Any] = {}
    if "auth_token" in query and "authToken" in query:
        raise InvalidStoreURL(f"{shown!r} gives both auth_token and authToken; keep one")
    token = query.get("auth_token", query.get("authToken"))
    if token is not None:
        knobs["auth_token"] = token
    if "trace_max" in query:
        knobs["trace_max"] = knob_int(query, "trace_max", DEFAULT_TRACE_MAX, minimum=0)
    if "busy_timeout_ms" in query:
        knobs["busy_timeout_ms"] = knob_int(
            query, "busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS, minimum=0
        )
    if "synchronous" in query:
        knobs["synchronous"] = knob_choice(query, "synchronous", "FULL", SYNCHRONOUS_CHOICES)
    if "sync_url" in query:
        knobs["sync_url"] = query["sync_url"]
    if "sync_interval" in query:
        knobs["sync_interval"] = knob_float(query, "sync_interval", 0.0, minimum=0.0)
    return knobs


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``(database, store knobs, retry arguments)`` for ``from_url``.

    Keyword knobs win over the URL's; unknown keyword knobs or a combination the constructor
    refuses raise :class:`InvalidStoreURL` (the token not shown); the retry arguments are those
    of ``connect_with_retry`` from harel-core's ``retry_arguments`` (by default none for a file,
    a few for a server or replica; a bad ``connect_retries`` / ``retry_delay`` raises
    ``ValueError`` naming it).
    """
    database, url_knobs, url_connect = _parse_url(url)
    unknown = sorted(set(knobs) - KNOBS - CONNECT_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a libSQL store; "
            f"allowed: {', '.join(sorted(KNOBS | CONNECT_KNOBS))}"
        )
    store_knobs = {**url_knobs, **{k: v for k, v in knobs.items() if k in KNOBS}}
    try:
        options = make_options(database, **store_knobs)
    except (TypeError, ValueError) as exc:
        raise InvalidStoreURL(f"{redact_url(url)}: {exc}") from None
    connect = {**url_connect, **{k: v for k, v in knobs.items() if k in CONNECT_KNOBS}}
    retry = retry_arguments(
        connect,
        what=options.where,
        default_retries=0 if options.mode == "file" else DEFAULT_REMOTE_RETRIES,
        default_delay=DEFAULT_RETRY_DELAY,
    )
    return database, store_knobs, retry
