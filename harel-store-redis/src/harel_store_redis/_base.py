"""What ``RedisStore`` and ``AsyncRedisStore`` share besides their driver: the constructor,
settings checked once, and the plan over the key prefix (``harel_store_redis._plan.RedisPlan``).
Imports no driver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from harel.store.contract import DEFAULT_TRACE_MAX, Capabilities
from harel.store.errors import StoreConfigError, StoreError

from harel_store_redis._errors import client_retries
from harel_store_redis._options import describe_connection
from harel_store_redis._plan import RedisPlan
from harel_store_redis._requests import DEFAULT_MAX_PAYLOAD_BYTES
from harel_store_redis._schema import Keys
from harel_store_redis._spec import CAPABILITIES, DEFAULT_PREFIX, SPEC

C = TypeVar("C")
"""The driver's client type (``redis.Redis`` or ``redis.asyncio.Redis``)."""


def cluster_node(client: Any) -> tuple[str, int] | None:
    """``(host, port)`` of the node a cluster client (``redis.cluster.RedisCluster`` or its
    asyncio twin) reaches first; ``None`` for a plain client."""
    manager = getattr(client, "nodes_manager", None)
    if manager is None:
        return None
    nodes = list(getattr(manager, "startup_nodes", {}).values())
    if nodes:
        first = nodes[0]
        return str(first.host), int(first.port)
    return "?", 0


def cluster_retries(client: Any) -> bool:
    """Whether a cluster client re-sends failed commands itself (its ``retry`` has retries;
    the stores' own cluster clients have none)."""
    if getattr(client, "nodes_manager", None) is None:
        return False
    retry = getattr(client, "retry", None)
    count = getattr(retry, "get_retries", None)
    return bool(count()) if callable(count) else retry is not None


class RedisStoreBase(Generic[C]):
    """Settings of one store over one key prefix, and the plan its contract methods run.

    The constructor checks the settings against ``client`` (made with
    ``decode_responses=False``; the caller keeps owning it unless ``owns_client=True``) and
    then calls :meth:`_opened`, where the sync store talks to the server (and
    :meth:`_opening_failed` when any of it fails).
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    trace_max: int | None
    prefix: str
    _retried: bool
    """Whether the client re-sends failed commands itself (then no connection failure proves
    that a request did not run: see :func:`harel_store_redis._errors.map_error`)."""
    where: str
    max_payload_bytes: int
    _plan: RedisPlan

    def __init__(
        self,
        client: C,
        *,
        prefix: str = DEFAULT_PREFIX,
        trace_max: int | None = DEFAULT_TRACE_MAX,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        shards: int | None = None,
        owns_client: bool = False,
    ) -> None:
        self._client: C | None = client
        self._owns_client = owns_client
        try:
            self._configure(client, prefix, trace_max, max_payload_bytes, shards)
            self._opened()
        except BaseException:
            self._opening_failed()
            raise

    def _configure(
        self,
        client: Any,
        prefix: str,
        trace_max: int | None,
        max_payload_bytes: int,
        shards: int | None,
    ) -> None:
        settings: Callable[[], dict[str, Any]] = client.get_connection_kwargs
        connection_kwargs = settings()
        node = cluster_node(client)
        values = SPEC.knob_values(
            {
                "prefix": prefix,
                "trace_max": trace_max,
                "max_payload_bytes": max_payload_bytes,
                "shards": shards,
            }
        )
        self.prefix, self.trace_max = values["prefix"], values["trace_max"]
        self.max_payload_bytes = values["max_payload_bytes"]
        self.where = describe_connection(connection_kwargs, self.prefix, node)
        if connection_kwargs.get("decode_responses"):
            raise StoreConfigError(
                f"the client for {self.where} decodes replies (decode_responses=True); the "
                "store reads bytes: pass a client made with decode_responses=False, or use "
                "from_url()"
            )
        self._retried = client_retries(connection_kwargs) or cluster_retries(client)
        self._plan = RedisPlan(
            Keys(self.prefix.encode("utf-8")),
            self.where,
            self.max_payload_bytes,
            cluster=node is not None,
            shards=values["shards"],
        )

    def _opened(self) -> None:
        """Called at the end of the constructor (the sync store opens here; no-op by default)."""

    def _opening_failed(self) -> None:
        """Called when the constructor fails (the sync store closes an owned client here)."""

    @property
    def _keys(self) -> Keys:
        """The key names under the store's prefix."""
        return self._plan.keys

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where})"

    def _closed(self) -> StoreError:
        return StoreError(f"the store over {self.where} is closed; open a new store")
