"""One Redis store's validated settings: :class:`RedisOptions`, built by :func:`open_options`
from a URL and the knobs :data:`~harel_store_redis._spec.SPEC` declares, and how a client's
place is named in messages (:func:`describe_connection`; never a credential)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.errors import InvalidStoreURL

from harel_store_redis._spec import DEFAULT_PORT, SPEC


def describe_connection(
    kwargs: dict[str, Any], prefix: str, cluster_node: tuple[str, int] | None = None
) -> str:
    """Where a client's data lives, from its connection keyword arguments (no credentials);
    ``cluster_node``: the node a cluster client was started from."""
    path = kwargs.get("path") or kwargs.get("unix_socket_path")
    if cluster_node is None and path:
        return f"Redis unix://{path}?db={kwargs.get('db', 0)} (prefix {prefix!r})"
    default = (str(kwargs.get("host", "localhost")), kwargs.get("port", DEFAULT_PORT))
    host, port = cluster_node or default
    scheme = "rediss" if kwargs.get("ssl") or "ssl_context" in kwargs else "redis"
    server = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
    if cluster_node is not None:
        return f"Redis Cluster {server}/0 (prefix {prefix!r})"
    return f"Redis {server}/{kwargs.get('db', 0)} (prefix {prefix!r})"


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """Validated settings of one store (build it with :func:`open_options`); ``repr`` and
    :attr:`where` never show the password."""

    scheme: str
    host: str
    port: int
    unix_path: str | None
    username: str | None
    password: str | None = field(repr=False)
    prefix: str
    db: int
    trace_max: int | None
    socket_timeout: float
    connect_timeout: float
    max_connections: int | None
    max_payload_bytes: int
    ssl_ca_certs: str | None
    ssl_cert_reqs: str
    cluster: bool
    shards: int | None

    @property
    def where(self) -> str:
        """Where the data lives, for messages: server, database and prefix (no credentials)."""
        node = (self.host, self.port) if self.cluster else None
        return describe_connection(self.client_kwargs(), self.prefix, node)

    @property
    def prefix_bytes(self) -> bytes:
        """The key prefix as Redis stores it."""
        return self.prefix.encode("utf-8")

    def store_kwargs(self) -> dict[str, Any]:
        """The store constructors' keyword arguments besides the client."""
        names = ("prefix", "trace_max", "max_payload_bytes", "shards")
        return {name: getattr(self, name) for name in names}

    def client_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``redis.Redis`` / ``redis.asyncio.Redis`` (and of their
        cluster clients): replies stay bytes (the plan decodes), RESP2 (script replies as plain
        arrays).  The caller adds ``retry`` (none: the plan retries only what is safe)."""
        place = {"host": self.host, "port": self.port}
        if self.unix_path is not None:
            place = {"unix_socket_path": self.unix_path}
        kwargs: dict[str, Any] = {
            **place,
            "username": self.username,
            "password": self.password,
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.connect_timeout,
            "decode_responses": False,
            "protocol": 2,
        }
        if self.cluster:  # database 0 only; a master that is down must not stop the others
            kwargs["require_full_coverage"] = False
        else:
            kwargs["db"] = self.db
        if not self.cluster or self.max_connections is not None:  # else the cluster's default
            kwargs["max_connections"] = self.max_connections
        if self.scheme == "rediss":
            kwargs.update(ssl=True, ssl_cert_reqs=self.ssl_cert_reqs)
            if self.ssl_ca_certs is not None:
                kwargs["ssl_ca_certs"] = self.ssl_ca_certs
        return kwargs


def open_options(url: str, knobs: dict[str, Any]) -> tuple[RedisOptions, dict[str, Any]]:
    """``from_url``'s settings (``url``'s with ``knobs`` winning; the ``password`` knob, when
    not given, is the URL's user part's) and the keyword arguments of ``connect_with_retry``
    (retry while the server is unreachable, named as :attr:`RedisOptions.where`)."""
    arguments, retry = SPEC.open_args(url, knobs)
    url_password = arguments.pop("url_password")
    if arguments["password"] is None:
        arguments["password"] = url_password
    options = RedisOptions(**arguments)
    if options.cluster and options.unix_path is not None:
        raise InvalidStoreURL(
            "a Redis Cluster is reached over TCP: use redis://host:port/0?cluster=yes"
        )
    return options, {**retry, "what": options.where}
