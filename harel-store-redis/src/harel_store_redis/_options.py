"""Store options: ``redis://`` / ``rediss://`` / ``unix://`` URLs, knobs and their validation.

URL forms::

    redis://[[user][:password]@]host[:port][/db][?knob=value&...]
    rediss://...                      (TLS)
    unix://[[user][:password]@]/path/to/redis.sock[?db=N&...]

Knobs ride as query parameters or as keyword arguments of ``from_url`` (keywords win):
``prefix`` (key namespace, default ``harel:``), ``db``, ``password`` (for ``unix://`` URLs
without a user part), ``trace_max``, ``socket_timeout`` / ``connect_timeout`` (seconds),
``max_connections``, ``max_payload_bytes``, ``ssl_ca_certs``, ``ssl_cert_reqs``
(``required``/``optional``/``none``), and ``connect_retries`` / ``retry_delay`` for the
open's bounded retry.  Nothing here imports redis-py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.common import RETRY_KNOBS, parse_store_url, retry_arguments, retry_knobs
from harel.store.common.urls import knob_bool, knob_choice, knob_float, knob_int
from harel.store.contract import DEFAULT_TRACE_MAX
from harel.store.errors import InvalidStoreURL, StoreConfigError

from harel_store_redis._requests import DEFAULT_MAX_PAYLOAD_BYTES

SCHEMES = ("redis", "rediss", "unix")
DEFAULT_PREFIX = "harel:"
DEFAULT_PORT = 6379
DEFAULT_SOCKET_TIMEOUT = 10.0
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_CONNECT_RETRIES = 5
DEFAULT_RETRY_DELAY = 0.2
CERT_REQS = ("required", "optional", "none")

STORE_KNOBS = frozenset(
    {
        "prefix",
        "db",
        "password",
        "trace_max",
        "socket_timeout",
        "connect_timeout",
        "max_connections",
        "max_payload_bytes",
        "ssl_ca_certs",
        "ssl_cert_reqs",
        "cluster",
        "shards",
    }
)
"""Options of the store itself (URL query or keywords)."""
CONNECT_KNOBS = RETRY_KNOBS
"""Options of the open: how often and how patiently ``from_url`` retries an unreachable server."""


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """Validated settings of one store; ``repr`` and :attr:`where` never show the password."""

    scheme: str = "redis"
    host: str = "localhost"
    port: int = DEFAULT_PORT
    unix_path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    prefix: str = DEFAULT_PREFIX
    trace_max: int | None = DEFAULT_TRACE_MAX
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_connections: int | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    ssl_ca_certs: str | None = None
    ssl_cert_reqs: str = "required"
    cluster: bool = False
    shards: int | None = None

    @property
    def where(self) -> str:
        """Where the data lives, for messages: server, database and prefix (no credentials)."""
        if self.unix_path is not None:
            server = f"unix://{self.unix_path}?db={self.db}"
        else:
            host = f"[{self.host}]" if ":" in self.host else self.host
            server = f"{self.scheme}://{host}:{self.port}/{self.db}"
        kind = "Redis Cluster" if self.cluster else "Redis"
        return f"{kind} {server} (prefix {self.prefix!r})"

    @property
    def prefix_bytes(self) -> bytes:
        """The key prefix as Redis stores it."""
        return self.prefix.encode("utf-8")

    def store_kwargs(self) -> dict[str, Any]:
        """The store constructors' keyword arguments besides the client."""
        return {
            "prefix": self.prefix,
            "trace_max": self.trace_max,
            "max_payload_bytes": self.max_payload_bytes,
            "shards": self.shards,
        }

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments shared by ``redis.Redis`` and ``redis.asyncio.Redis``.

        Replies stay bytes (the plan decodes), RESP2 (script replies as plain arrays).  The
        driver adds its own ``retry`` (none: the plan retries only what is safe to re-send).
        """
        kwargs: dict[str, Any] = {
            "db": self.db,
            "username": self.username,
            "password": self.password,
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.connect_timeout,
            "decode_responses": False,
            "protocol": 2,
            "max_connections": self.max_connections,
        }
        if self.unix_path is not None:
            kwargs["unix_socket_path"] = self.unix_path
        else:
            kwargs["host"] = self.host
            kwargs["port"] = self.port
        if self.cluster:
            # a cluster has one database (0); a master that is down must not stop the client
            # from serving the other masters' slots
            del kwargs["db"]
            kwargs["require_full_coverage"] = False
            if self.max_connections is None:
                del kwargs["max_connections"]  # the cluster client's own default per node
        if self.scheme == "rediss":
            kwargs["ssl"] = True
            kwargs["ssl_cert_reqs"] = self.ssl_cert_reqs
            if self.ssl_ca_certs is not None:
                kwargs["ssl_ca_certs"] = self.ssl_ca_certs
        return kwargs


def check_prefix(prefix: object) -> str:
    """A usable key prefix: a non-empty str without control characters."""
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"prefix must be a non-empty str, got {prefix!r}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in prefix):
        raise ValueError(f"prefix must not hold control characters, got {prefix!r}")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"prefix must be valid Unicode text, got {prefix!r}") from None
    return prefix


def check_trace_max(trace_max: object) -> int | None:
    """``trace_max`` itself when it is ``None`` or an int >= 0."""
    if trace_max is not None and (
        isinstance(trace_max, bool) or not isinstance(trace_max, int) or trace_max < 0
    ):
        raise ValueError(f"trace_max must be an int >= 0 or None, got {trace_max!r}")
    return trace_max


def _db_from_path(path: str, shown: str) -> int | None:
    text = path.strip("/")
    if not text:
        return None
    try:
        db = int(text)
    except ValueError:
        raise InvalidStoreURL(
            f"{shown!r}: the path must be a database number (redis://host:6379/0), got {text!r}"
        ) from None
    if db < 0:
        raise InvalidStoreURL(f"{shown!r}: the database number must be >= 0")
    return db


def parse_redis_url(url: str, overrides: dict[str, Any]) -> tuple[RedisOptions, dict[str, Any]]:
    """``(options, connect knobs)`` of a URL; keyword ``overrides`` win over the URL's query.

    Raises :class:`InvalidStoreURL` for another scheme, a malformed part or an unknown knob
    (the password is never shown).
    """
    parsed = parse_store_url(url)
    shown = parsed.redacted
    if parsed.scheme not in SCHEMES:
        raise InvalidStoreURL(
            f"{shown!r} is not a Redis URL; use redis://host:6379/0, rediss://host:6380/0 "
            "or unix:///path/to/redis.sock"
        )
    unknown = sorted(set(overrides) - STORE_KNOBS - CONNECT_KNOBS)
    if unknown:
        raise InvalidStoreURL(
            f"unknown option(s) {', '.join(unknown)} for a Redis store; "
            f"allowed: {', '.join(sorted(STORE_KNOBS | CONNECT_KNOBS))}"
        )
    query = parsed.knobs(STORE_KNOBS | CONNECT_KNOBS)
    knobs: dict[str, Any] = {}
    if parsed.scheme == "unix":
        if parsed.host or parsed.port:
            raise InvalidStoreURL(
                f"{shown!r}: a unix:// URL names a socket path, not a host: "
                "unix:///path/to/redis.sock"
            )
        if not parsed.path.strip("/"):
            raise InvalidStoreURL(f"{shown!r}: a unix:// URL needs the socket's path")
        knobs["unix_path"] = parsed.path
    else:
        knobs["host"] = parsed.host or "localhost"
        knobs["port"] = parsed.port or DEFAULT_PORT
        path_db = _db_from_path(parsed.path, shown)
        if path_db is not None:
            if "db" in query and knob_int(query, "db", 0) != path_db:
                raise InvalidStoreURL(f"{shown!r} names two different databases (path and ?db=)")
            knobs["db"] = path_db
    knobs["scheme"] = parsed.scheme
    if parsed.username:
        knobs["username"] = parsed.username
    if parsed.password is not None:
        knobs["password"] = parsed.password
    for name in ("db", "max_connections", "max_payload_bytes", "trace_max"):
        if name in query:
            minimum = 1 if name in ("max_connections", "max_payload_bytes") else 0
            knobs[name] = knob_int(query, name, 0, minimum=minimum)
    for name in ("socket_timeout", "connect_timeout"):
        if name in query:
            knobs[name] = knob_float(query, name, 0.0, minimum=0.001)
    if "cluster" in query:
        knobs["cluster"] = knob_bool(query, "cluster", False)
    if "shards" in query:
        knobs["shards"] = knob_int(query, "shards", 1, minimum=1)
    if "ssl_cert_reqs" in query:
        knobs["ssl_cert_reqs"] = knob_choice(query, "ssl_cert_reqs", "required", CERT_REQS)
    for name in ("prefix", "password", "ssl_ca_certs"):
        if name in query:
            knobs[name] = query[name]
    connect = retry_knobs(query)
    knobs.update({k: v for k, v in overrides.items() if k in STORE_KNOBS})
    connect.update({k: v for k, v in overrides.items() if k in CONNECT_KNOBS})
    return make_options(**knobs), connect


def make_options(**knobs: Any) -> RedisOptions:
    """Validate keyword settings (``ValueError``/``TypeError`` name the bad one)."""
    check_prefix(knobs.get("prefix", DEFAULT_PREFIX))
    check_trace_max(knobs.get("trace_max", DEFAULT_TRACE_MAX))
    for name in ("db", "max_connections", "max_payload_bytes"):
        value = knobs.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < (0 if name == "db" else 1):
            raise ValueError(f"{name} must be >= {0 if name == 'db' else 1}, got {value}")
    for name in ("socket_timeout", "connect_timeout"):
        value = knobs.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
        ):
            raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    if knobs.get("ssl_cert_reqs", "required") not in CERT_REQS:
        raise ValueError(f"ssl_cert_reqs must be one of {', '.join(CERT_REQS)}")
    cluster = knobs.get("cluster", False)
    if not isinstance(cluster, bool):
        raise TypeError(f"cluster must be a bool, got {cluster!r}")
    check_shards(knobs.get("shards"))
    if cluster and knobs.get("unix_path") is not None:
        raise InvalidStoreURL(
            "a Redis Cluster is reached over TCP: use redis://host:port/0?cluster=yes"
        )
    if cluster and knobs.get("db", 0) != 0:
        raise InvalidStoreURL(
            "a Redis Cluster has only database 0 (redis://host:port/0?cluster=yes)"
        )
    return RedisOptions(**knobs)


MAX_SHARDS = 64
"""The most shards a sharded layout can have (a seq names its shard in 6 bits)."""


def check_shards(shards: object) -> int | None:
    """``shards`` itself when it is ``None`` (no sharded layout asked for) or an int in
    1-:data:`MAX_SHARDS`."""
    if shards is None:
        return None
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise TypeError(f"shards must be an int, got {shards!r}")
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be between 1 and {MAX_SHARDS}, got {shards}")
    return shards


def from_url_args(url: str, knobs: dict[str, Any]) -> tuple[RedisOptions, dict[str, Any]]:
    """``(options, retry arguments)`` of ``from_url``: the validated settings, and the keyword
    arguments of ``connect_with_retry`` / ``aconnect_with_retry`` (retry only while the server
    is unreachable)."""
    options, connect = parse_redis_url(url, knobs)
    retry = retry_arguments(
        connect,
        what=options.where,
        default_retries=DEFAULT_CONNECT_RETRIES,
        default_delay=DEFAULT_RETRY_DELAY,
    )
    return options, retry


def describe_connection(
    kwargs: dict[str, Any], prefix: str, cluster_node: tuple[str, int] | None = None
) -> str:
    """Where a client's data lives, from its connection keyword arguments (no credentials);
    ``cluster_node``: the node a cluster client was started from."""
    if cluster_node is not None:
        host, port = cluster_node
        host = f"[{host}]" if ":" in host else host
        scheme = "rediss" if kwargs.get("ssl") or "ssl_context" in kwargs else "redis"
        return f"Redis Cluster {scheme}://{host}:{port}/0 (prefix {prefix!r})"
    db = kwargs.get("db", 0)
    path = kwargs.get("path") or kwargs.get("unix_socket_path")
    if path:
        return f"Redis unix://{path}?db={db} (prefix {prefix!r})"
    host = str(kwargs.get("host", "localhost"))
    host = f"[{host}]" if ":" in host else host
    scheme = "rediss" if kwargs.get("ssl") or "ssl_context" in kwargs else "redis"
    return f"Redis {scheme}://{host}:{kwargs.get('port', DEFAULT_PORT)}/{db} (prefix {prefix!r})"


def check_client_kwargs(kwargs: dict[str, Any], where: str) -> None:
    """Refuse a client whose replies the plan cannot read (``decode_responses=True``)."""
    if kwargs.get("decode_responses"):
        raise StoreConfigError(
            f"the client for {where} decodes replies (decode_responses=True); the store reads "
            "bytes: pass a client made with decode_responses=False, or use from_url()"
        )
