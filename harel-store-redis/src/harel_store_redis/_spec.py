"""The Redis backend as core's registry and URL parsing see it; imports no redis-py.

URL forms: ``redis://[[user][:password]@]host[:port][/db]``, ``rediss://...`` (TLS),
``unix://[[user][:password]@]/path/to/redis.sock[?db=N]``.  Knobs ride as query parameters or
keyword arguments of ``from_url`` (keywords win; ``password`` wins over the URL's user part);
``connect_retries`` / ``retry_delay`` (``from_url`` only) retry an unreachable server.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import (
    BackendSpec,
    Knob,
    LegacyEnv,
    StoreURL,
    parse_store_url,
    trace_max_knob,
)
from harel.store.contract import Capabilities
from harel.store.errors import InvalidStoreOption, InvalidStoreURL

from harel_store_redis._requests import DEFAULT_MAX_PAYLOAD_BYTES

DEFAULT_PREFIX = "harel:"
DEFAULT_PORT = 6379
CERT_REQS = ("required", "optional", "none")
MAX_SHARDS = 64
"""The most shards a sharded layout can have (a seq names its shard in 6 bits)."""


def check_prefix(prefix: str) -> str:
    """A usable key prefix: non-empty text without control characters, valid as UTF-8."""
    if not prefix or any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) < 0xE000 for c in prefix):
        raise InvalidStoreOption(
            f"option prefix={prefix!r} must be a non-empty string of valid Unicode text "
            "without control characters"
        )
    return prefix


def _parse(url: str) -> StoreURL:
    """The URL with the database a ``redis://host/N`` path names moved into ``?db=``."""
    parsed = parse_store_url(url)
    path = parsed.path.strip("/")
    if parsed.scheme not in ("redis", "rediss") or not path:
        return parsed
    if not path.isdecimal():
        raise InvalidStoreURL(
            f"{parsed.redacted!r}: the path must be a database number (redis://host:6379/0), "
            f"got {path!r}"
        )
    query = parsed.query.get("db", path)
    if query.strip().isdecimal() and int(query) != int(path):  # else the db knob refuses it
        raise InvalidStoreURL(f"{parsed.redacted!r} names two different databases (path and ?db=)")
    return parsed.with_query({"db": path, **parsed.query})


def _location(parsed: StoreURL) -> dict[str, Any]:
    """The server (host and port, or a ``unix://`` socket's path) and the URL's credentials."""
    unix = parsed.scheme == "unix"
    if unix and (parsed.host or parsed.port):
        raise InvalidStoreURL(
            f"{parsed.redacted!r}: a unix:// URL names a socket path, not a host: "
            "unix:///path/to/redis.sock"
        )
    if unix and not parsed.path.strip("/"):
        raise InvalidStoreURL(f"{parsed.redacted!r}: a unix:// URL needs the socket's path")
    return {
        "scheme": parsed.scheme,
        "host": parsed.host or "localhost",
        "port": parsed.port or DEFAULT_PORT,
        "unix_path": parsed.path if unix else None,
        "username": parsed.username,
        "url_password": parsed.password,
    }


def _one_database(values: dict[str, Any]) -> None:
    """A Redis Cluster has database 0 only."""
    if values["cluster"] and values["db"] != 0:
        raise InvalidStoreOption(
            "a Redis Cluster has only database 0 (redis://host:port/0?cluster=yes)"
        )


SPEC = BackendSpec(
    name="redis",
    title="Redis",
    schemes=("redis", "rediss", "unix"),
    url_forms=("redis://host:6379/0", "rediss://host:6380/0", "unix:///path/to/redis.sock"),
    store="harel_store_redis.sync:RedisStore",
    async_store="harel_store_redis.aio:AsyncRedisStore",
    capabilities=Capabilities(
        persistent=True, multi_process=True, ordered_listing=True, exact_pages=True
    ),
    distribution="harel-store-redis",
    location=_location,
    parser=_parse,
    knobs=(
        Knob("prefix", str, DEFAULT_PREFIX, check=check_prefix, doc="key namespace"),
        Knob("db", int, 0, minimum=0, doc="database number (also the redis:// URL's path)"),
        Knob("password", str, None, optional=True, secret=True, doc="default: the URL's"),
        trace_max_knob(),
        Knob("socket_timeout", float, 10.0, above=0, doc="seconds a call may take"),
        Knob("connect_timeout", float, 5.0, above=0, doc="seconds a connect may take"),
        Knob("max_connections", int, None, minimum=1, optional=True, doc="pool size"),
        Knob("max_payload_bytes", int, DEFAULT_MAX_PAYLOAD_BYTES, minimum=1, doc="per request"),
        Knob("ssl_ca_certs", str, None, optional=True, doc="CA file of rediss://"),
        Knob("ssl_cert_reqs", str, "required", choices=CERT_REQS, doc="rediss:// cert check"),
        Knob("cluster", bool, False, doc="the address is a node of a Redis Cluster"),
        Knob("shards", int, None, minimum=1, maximum=MAX_SHARDS, optional=True, doc="layout"),
    ),
    check=_one_database,
    retry=(5, 0.2),
    legacy=LegacyEnv(url_vars=("STM_STORE_REDIS_URL", "STM_REDIS_URL")),
    harness="harel_store_redis.testing:harness_from_url",
    # the Redis server on this machine; each workdir gets its own key prefix
    local_url="redis://127.0.0.1:6379/0?prefix=harel-test:{workdir}:",
    exists="harel_store_redis._exists:store_exists",
    description="Redis (redis-py; async over redis.asyncio): one Lua script per commit",
)
"""The backend's declaration; the ``harel.stores`` entry point names it."""
CAPABILITIES = SPEC.capabilities
"""Data lives in the server (a new process sees it; how it survives a *server* restart is the
server's AOF/RDB configuration), any number of processes share it (every write is one atomic
script), listing is ordered by id from lexicographic indexes, pages are exact."""
