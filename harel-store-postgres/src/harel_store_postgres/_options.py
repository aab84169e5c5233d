"""Store options: ``postgresql://`` / ``postgres://`` URLs and keyword knobs, validated.

URL form (libpq's)::

    postgresql://[user[:password]@][host][:port][/dbname][?knob=value&...]

Knobs of this store (query parameters, or keyword arguments of ``from_url`` that win over the
URL's): ``schema`` (default ``harel``), ``pool_min`` (1), ``pool_max`` (10), ``pool_timeout``
(seconds a call waits in all for a live pooled connection before ``StoreUnavailable``, 5),
``reconnect_timeout`` (seconds the pool keeps retrying one lost connection with backoff
before it gives up and the next call starts afresh, 2), ``trace_max`` (200),
``connect_retries`` (8) and ``retry_delay`` (0.5 s, doubled per retry; both validated by
harel-core's ``retry_arguments``; they bound the wait of the *open* only).  Every other query
parameter must be a libpq connection keyword (``sslmode``, ``connect_timeout``,
``application_name``, ``options``, ...) and is handed to libpq unchanged; ``connect_timeout``
defaults to 5 seconds.

While the server is down a call fails within ``pool_timeout`` (a server that refuses
connections: as soon as the wait ends; one that does not answer at all: ``connect_timeout``
bounds each attempt); once it is back, the same store serves again within about
``reconnect_timeout`` (the pool's attempts never back off longer than that).

The password never appears in a message or a ``repr``: messages use the redacted URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harel.store.common import parse_store_url, retry_arguments
from harel.store.common.retry import retry_knobs
from harel.store.common.urls import StoreURL, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL

SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "harel"
DEFAULT_POOL_MIN = 1
DEFAULT_POOL_MAX = 10
DEFAULT_POOL_TIMEOUT = 5.0
DEFAULT_RECONNECT_TIMEOUT = 2.0
DEFAULT_CONNECT_RETRIES = 8
DEFAULT_RETRY_DELAY = 0.5
DEFAULT_CONNECT_TIMEOUT = "5"
MAX_IDENTIFIER_BYTES = 63
"""PostgreSQL truncates longer identifiers (NAMEDATALEN - 1); a schema name must fit."""
_retry_arguments = partial(
    retry_arguments, default_retries=DEFAULT_CONNECT_RETRIES, default_delay=DEFAULT_RETRY_DELAY
)
"""``retry_arguments`` with this backend's defaults (``connect_retries=8``, ``retry_delay=0.5``)."""

STORE_KNOBS = frozenset(
    {
        "schema",
        "pool_min",
        "pool_max",
        "pool_timeout",
        "reconnect_timeout",
        "trace_max",
        "connect_retries",
        "retry_delay",
    }
)
"""Knobs this store reads (URL query or ``from_url`` keywords)."""

LIBPQ_KNOBS = frozenset(
    {
        "application_name",
        "channel_binding",
        "client_encoding",
        "connect_timeout",
        "dbname",
        "fallback_application_name",
        "gssencmode",
        "gsslib",
        "host",
        "hostaddr",
        "keepalives",
        "keepalives_count",
        "keepalives_idle",
        "keepalives_interval",
        "krbsrvname",
        "load_balance_hosts",
        "options",
        "passfile",
        "password",
        "port",
        "require_auth",
        "requiressl",
        "service",
        "sslcert",
        "sslcompression",
        "sslcrl",
        "sslcrldir",
        "sslkey",
        "sslmode",
        "sslnegotiation",
        "sslpassword",
        "sslrootcert",
        "sslsni",
        "target_session_attrs",
        "tcp_user_timeout",
        "user",
    }
)
"""libpq connection keywords a URL may carry in its query (passed to libpq as they are)."""


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """Validated settings of one store.  ``connect`` (libpq keywords, the password among them)
    is left out of the ``repr``; ``where`` is the redacted URL used in every message."""

    connect: Mapping[str, str] = field(repr=False)
    where: str
    schema: str = DEFAULT_SCHEMA
    pool_min: int = DEFAULT_POOL_MIN
    pool_max: int = DEFAULT_POOL_MAX
    pool_timeout: float = DEFAULT_POOL_TIMEOUT
    trace_max: int | None = DEFAULT_TRACE_MAX
    connect_retries: int = DEFAULT_CONNECT_RETRIES
    retry_delay: float = DEFAULT_RETRY_DELAY
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT

    def with_schema(self, schema: str) -> PostgresOptions:
        """The same settings over another schema (validated)."""
        return replace(self, schema=check_schema(schema))

    def retry_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``connect_with_retry`` / ``aconnect_with_retry`` for the
        open: harel-core's ``retry_arguments`` over ``connect_retries`` / ``retry_delay``
        (validated again: options built by hand are refused with ``ValueError`` too)."""
        knobs = {"connect_retries": self.connect_retries, "retry_delay": self.retry_delay}
        return _retry_arguments(knobs, what=self.where)


def check_schema(schema: object) -> str:
    """``schema`` when PostgreSQL can hold it as a schema name exactly as given.

    Any text is quoted safely; refused are non-strings, the empty name, NUL, lone surrogates,
    names over 63 UTF-8 bytes (PostgreSQL would silently truncate them) and the reserved
    ``pg_`` prefix.
    """
    if not isinstance(schema, str) or not schema:
        raise InvalidStoreURL(f"schema must be a non-empty name, got {schema!r}")
    if "\x00" in schema:
        raise InvalidStoreURL("schema name must not hold NUL")
    try:
        size = len(schema.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidStoreURL("schema name must be valid Unicode text") from None
    if size > MAX_IDENTIFIER_BYTES:
        raise InvalidStoreURL(
            f"schema name {schema[:20]!r}... is {size} bytes; PostgreSQL names hold at most "
            f"{MAX_IDENTIFIER_BYTES} bytes"
        )
    if schema.startswith("pg_"):
        raise InvalidStoreURL(f"schema name {schema!r} is reserved (pg_ prefix); pick another")
    return schema


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidStoreURL(f"option {name}={value!r} must be an int >= {minimum}")
    return value


def _check_float(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidStoreURL(f"option {name}={value!r} must be a number >= 0")
    return float(value)


def _typed_url_knobs(query: Mapping[str, str]) -> dict[str, Any]:
    knobs: dict[str, Any] = {}
    if "schema" in query:
        knobs["schema"] = query["schema"]
    for name in ("pool_min", "pool_max", "trace_max"):
        if name in query:
            knobs[name] = knob_int(dict(query), name, 0, minimum=0)
    for name in ("pool_timeout", "reconnect_timeout"):
        if name in query:
            knobs[name] = knob_float(dict(query), name, 0.0)
    knobs.update(retry_knobs(query))
    return knobs


def _connect_keywords(parsed: StoreURL, query: Mapping[str, str]) -> dict[str, str]:
    connect: dict[str, str] = {"connect_timeout": DEFAULT_CONNECT_TIMEOUT}
    if parsed.host:
        connect["host"] = parsed.host
    if parsed.port is not None:
        connect["port"] = str(parsed.port)
    if parsed.username:
        connect["user"] = parsed.username
    if parsed.password is not None:
        connect["password"] = parsed.password
    dbname = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
    if dbname:
        connect["dbname"] = dbname
    connect.update({key: value for key, value in query.items() if key in LIBPQ_KNOBS})
    return connect


def options_from_url(url: str, **knobs: Any) -> PostgresOptions:
    """Validated options of ``url`` with ``knobs`` (keyword knobs win over the URL's).

    :class:`InvalidStoreURL` for another scheme, an unknown or malformed knob, or a bad schema.
    """
    parsed = parse_store_url(url)
    if parsed.scheme not in SCHEMES:
        raise InvalidStoreURL(
            f"{parsed.redacted!r} is not a PostgreSQL URL; use "
            "postgresql://user@host:5432/dbname?schema=harel"
        )
    query = parsed.knobs(STORE_KNOBS | LIBPQ_KNOBS)
    unknown = sorted(set(knobs) - STORE_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a postgres store; "
            f"allowed: {', '.join(sorted(STORE_KNOBS))}"
        )
    merged = {**_typed_url_knobs(query), **knobs}
    return make_options(_connect_keywords(parsed, query), parsed.redacted, **merged)


def make_options(
    connect: Mapping[str, str],
    where: str,
    *,
    schema: str = DEFAULT_SCHEMA,
    pool_min: int = DEFAULT_POOL_MIN,
    pool_max: int = DEFAULT_POOL_MAX,
    pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    trace_max: int | None = DEFAULT_TRACE_MAX,
    connect_retries: int = DEFAULT_CONNECT_RETRIES,
    retry_delay: float = DEFAULT_RETRY_DELAY,
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT,
) -> PostgresOptions:
    """Validate every knob (the error names the knob and never shows the password);
    ``connect_retries`` / ``retry_delay`` go through harel-core's ``retry_arguments``."""
    pool_min = _check_int(pool_min, "pool_min", 0)
    pool_max = _check_int(pool_max, "pool_max", 1)
    if pool_max < pool_min:
        raise InvalidStoreURL(f"pool_max={pool_max} must be >= pool_min={pool_min}")
    if trace_max is not None:
        trace_max = _check_int(trace_max, "trace_max", 0)
    retry = _retry_arguments(
        {"connect_retries": connect_retries, "retry_delay": retry_delay}, what=where
    )
    return PostgresOptions(
        connect=dict(connect),
        where=where,
        schema=check_schema(schema),
        pool_min=pool_min,
        pool_max=pool_max,
        pool_timeout=_check_float(pool_timeout, "pool_timeout"),
        trace_max=trace_max,
        connect_retries=retry["retries"],
        retry_delay=retry["delay"],
        reconnect_timeout=_check_float(reconnect_timeout, "reconnect_timeout"),
    )


def url_with_knobs(url: str, **knobs: str) -> str:
    """``url`` with the given query parameters set (replacing any of the same name)."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True)]
    query = [(key, value) for key, value in query if key not in knobs]
    query.extend(knobs.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


__all__ = [
    "DEFAULT_SCHEMA",
    "LIBPQ_KNOBS",
    "SCHEMES",
    "STORE_KNOBS",
    "PostgresOptions",
    "check_schema",
    "make_options",
    "options_from_url",
    "url_with_knobs",
]
