"""Conformance-kit support: one random key prefix per harness on a Redis server.

``RedisHarness(url)`` gives the kit stores over ``<url's prefix>kit-<random>:``; every
``open_sync()`` / ``open_async()`` is a new store object (its own connection pool) over that
namespace.  ``footprint`` reads the keys directly; ``destroy()`` closes what the harness opened
and deletes every key under the namespace.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio.cluster
import redis.cluster
from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.author import current_library
from harel.store.contract import Capabilities
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from harel_store_redis._keys import hash_tag, owner_prefix, seq_of, split_owned, text, untext
from harel_store_redis._options import open_options
from harel_store_redis._schema import Keys, receipt_field
from harel_store_redis._scripts import APPLIED, COMMIT_STATE
from harel_store_redis._shards import ShardMap
from harel_store_redis._spec import CAPABILITIES
from harel_store_redis.aio import AsyncRedisStore
from harel_store_redis.sync import RedisStore

_GLOB_SPECIALS = b"\\*?[]"


def with_prefix(url: str, prefix: str) -> str:
    """``url`` with its ``prefix`` query parameter set to ``prefix`` (other parts kept as
    written; ``unix:///path`` keeps its empty host)."""
    base, _, query = url.partition("?")
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "prefix"]
    pairs.append(("prefix", prefix))
    return f"{base}?{urlencode(pairs)}"


def with_address(url: str, host: str, port: int) -> str:
    """``url`` pointing at ``host:port`` instead (credentials, database and query kept)."""
    parts = urlsplit(url)
    userinfo, at, _ = parts.netloc.rpartition("@")
    shown = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{shown}:{port}"))


PROXIED_KNOBS: dict[str, Any] = {
    "connect_retries": 0,
    "connect_timeout": 1.0,
    "socket_timeout": 5.0,
}
"""The settings of a store opened through a proxy (:meth:`RedisHarness.open_sync_at`): a cut
connection is noticed at once, a lost answer within seconds, and an unreachable address fails
the connect within a second."""


def _proxied_settings() -> dict[str, Any]:
    """:data:`PROXIED_KNOBS` that are store options (the connect retries are ``from_url``'s)."""
    return {k: v for k, v in PROXIED_KNOBS.items() if k in ("connect_timeout", "socket_timeout")}


def glob_escape(raw: bytes) -> bytes:
    """``raw`` as a literal in a Redis ``MATCH`` pattern."""
    out = bytearray()
    for byte in raw:
        if byte in _GLOB_SPECIALS:
            out.append(0x5C)
        out.append(byte)
    return bytes(out)


class RedisHarness(StoreHarness):
    """A fresh key namespace on a Redis server as the kit's dataset."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES

    def __init__(self, url: str, *, prefix: str | None = None) -> None:
        options, _retry = open_options(url, {})
        self.prefix = prefix or f"{options.prefix}kit-{uuid.uuid4().hex[:16]}:"
        self._url = with_prefix(url, self.prefix)
        self.options, _ = open_options(self._url, {})
        self.keys = Keys(self.prefix.encode("utf-8"))
        self._sync: weakref.WeakSet[RedisStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncRedisStore] = weakref.WeakSet()
        self._admin: Any = None
        self.proxied_master: tuple[str, int] | None = None
        """On a cluster: the master :meth:`server_address` names (and :meth:`open_sync_at`
        reaches through the proxy) when set, e.g. the one serving a given execution's shard."""

    @contextmanager
    def _client(self) -> Iterator[Any]:
        """A client for the harness's own reads: a new plain one each time, or on a cluster
        one cluster client kept until :meth:`destroy` (building one reads the whole command
        table)."""
        if not self.options.cluster:
            with self._raw() as client:
                yield client
            return
        if self._admin is None:
            self._admin = self._raw()
        yield self._admin

    def _raw(self) -> Any:
        """A plain client with the stores' settings (a cluster client on a cluster)."""
        if self.options.cluster:
            return redis.cluster.RedisCluster(**self.options.client_kwargs())
        return redis.Redis(**self.options.client_kwargs())

    def open_sync(self) -> RedisStore:
        """A new ``RedisStore`` over the harness namespace."""
        store = RedisStore.from_url(self._url, connect_retries=0)
        self._sync.add(store)
        return store

    async def open_async(self) -> AsyncRedisStore:
        """A new ``AsyncRedisStore`` over the harness namespace."""
        store = await AsyncRedisStore.from_url(self._url, connect_retries=0)
        self._async.add(store)
        return store

    def url(self) -> str:
        """The URL of this namespace (another process opens the same dataset with it)."""
        return self._url

    def server_address(self) -> tuple[str, int] | None:
        """The server's TCP address (``None`` over a unix socket).  On a cluster: the master
        serving the prefix's one slot (a hash-tagged prefix), whose address the stores of
        :meth:`open_sync_at` reach through the proxy; ``None`` when the namespace spans
        several slots (a sharded layout: every master serves some)."""
        if self.options.unix_path is not None:
            return None
        if not self.options.cluster:
            return self.options.host, self.options.port
        if self.proxied_master is not None:
            return self.proxied_master
        if hash_tag(self.keys.prefix) is None:
            return None
        with self._client() as client:
            node = client.get_node_from_key(self.keys.prefix)
            return str(node.host), int(node.port)

    def _proxied_cluster(self, host: str, port: int) -> dict[str, Any]:
        """The keyword arguments of a cluster client that reaches the prefix's master through
        the proxy at ``host:port`` (``address_remap``) and every other node directly."""
        target = self.server_address()
        assert target is not None, "a sharded namespace has no one master to proxy"
        options = replace(self.options, host=host, port=port, **_proxied_settings())

        def remap(address: tuple[str, int]) -> tuple[str, int]:
            return (host, port) if (address[0], int(address[1])) == target else address

        return {**options.client_kwargs(), "address_remap": remap}

    def _open_sync_at(self, host: str, port: int) -> RedisStore:
        if self.options.cluster:
            client = redis.cluster.RedisCluster(
                **self._proxied_cluster(host, port), retry=Retry(NoBackoff(), 0)
            )
            return RedisStore(client, **self.options.store_kwargs(), owns_client=True)
        return RedisStore.from_url(with_address(self._url, host, port), **PROXIED_KNOBS)

    def open_sync_at(self, host: str, port: int) -> RedisStore:
        """A new ``RedisStore`` over the namespace through ``host:port`` (a proxy in front of
        the server), with :data:`PROXIED_KNOBS`."""
        store = self._open_sync_at(host, port)
        self._sync.add(store)
        return store

    async def open_async_at(self, host: str, port: int) -> AsyncRedisStore:
        """The async twin of :meth:`open_sync_at`."""
        if self.options.cluster and current_library() != "asyncio":
            store = await AsyncRedisStore.in_threads(partial(self._open_sync_at, host, port))
        elif self.options.cluster:
            aclient = redis.asyncio.cluster.RedisCluster(
                **self._proxied_cluster(host, port), retry=AsyncRetry(NoBackoff(), 0)
            )
            store = await AsyncRedisStore.open(
                aclient, **self.options.store_kwargs(), owns_client=True
            )
        else:
            url = with_address(self._url, host, port)
            store = await AsyncRedisStore.from_url(url, **PROXIED_KNOBS)
        self._async.add(store)
        return store

    @property
    def layouts(self) -> tuple[Keys, ...]:
        """The key names the namespace's data lives under: the prefix's, or each shard's when
        the URL asks for the sharded layout (``?shards=N``)."""
        if self.options.shards is None:
            return (self.keys,)
        return ShardMap.of(self.keys, self.options.shards).shards

    def keys_of(self, execution_id: str) -> Keys:
        """The key names ``execution_id``'s own records live under (its shard's, sharded)."""
        if self.options.shards is None:
            return self.keys
        return ShardMap.of(self.keys, self.options.shards).keys_of(execution_id)

    def footprint(self, execution_id: str) -> list[str]:
        """Every record of ``execution_id`` under the namespace, read with plain commands (in
        every shard of a sharded layout)."""
        labels: list[str] = []
        with self._client() as client:
            for keys in self.layouts:
                labels += self._footprint(client, keys, execution_id)
        return labels

    def _footprint(self, client: Any, keys: Keys, execution_id: str) -> list[str]:
        labels: list[str] = []
        owner = owner_prefix(execution_id)
        raw_id = text(execution_id)
        if client.exists(keys.execution(execution_id)):
            labels.append("execution")
        for raw in client.lrange(keys.trace(execution_id), 0, -1):
            labels.append(f"trace:{raw.partition(b' ')[0].decode()}")
        if client.hexists(keys.summaries, raw_id):
            labels.append("summary")
        for key in client.scan_iter(match=glob_escape(keys.prefix) + b"ix:*", count=1000):
            if client.zscore(key, raw_id) is not None:
                labels.append(f"index:{key[len(keys.prefix) :].decode('ascii', 'replace')}")
        for member in client.zrange(keys.owned, 0, -1):
            if member.startswith(owner):
                labels.append(f"owned:{_item(member)}")
        for member in client.zrange(keys.marks, 0, -1):
            if member.startswith(owner):
                labels.append(f"processed:{_item(member)}")
        for member in client.zrange(keys.timers, 0, -1):
            if member.startswith(owner):
                labels.append(f"timer:{_item(member)}")
        for member in client.hkeys(keys.timer_at):
            if member.startswith(owner):
                labels.append(f"timer-at:{_item(member)}")
        for entry_id, fields in client.xrange(keys.outbox):
            if fields.get(b"t") == raw_id:
                labels.append(f"outbox:{seq_of(entry_id)}")
        for entry_id, fields in client.xrange(keys.spawns):
            if fields.get(b"p") == raw_id:
                labels.append(f"spawn:{seq_of(entry_id)}")
        if client.hexists(keys.work, owner):
            labels.append("work")
        for priority, key in enumerate(keys.work_keys[1:]):
            if client.zscore(key, owner) is not None:
                labels.append(f"ready:{priority}")
        return labels

    def all_keys(self) -> list[bytes]:
        """Every key under the namespace (sorted)."""
        with self._client() as client:
            return sorted(client.scan_iter(match=glob_escape(self.keys.prefix) + b"*", count=1000))

    def dump(self) -> dict[bytes, Any]:
        """Every key under the namespace with its whole content (for before/after checks)."""
        out: dict[bytes, Any] = {}
        with self._client() as client:
            for key in self.all_keys():
                kind = client.type(key)
                if kind == b"string":
                    out[key] = client.get(key)
                elif kind == b"hash":
                    out[key] = client.hgetall(key)
                elif kind == b"list":
                    out[key] = client.lrange(key, 0, -1)
                elif kind == b"zset":
                    out[key] = client.zrange(key, 0, -1, withscores=True)
                elif kind == b"stream":
                    out[key] = client.xrange(key)
                else:
                    out[key] = kind
        return out

    def raw_commit(self) -> Callable[[str, int, str], None]:
        """The benchmarks' raw write, as issue 10 defines it for Redis: one ``SET`` of the
        document on a scratch key of the namespace (``<prefix>bench-raw:<id>``), on a new
        client with the stores' settings (a plain ``SET`` is no compare-and-set)."""
        client = self._raw()
        prefix = self.keys.prefix + b"bench-raw:"

        def write(execution_id: str, version: int, document: str) -> None:
            del version  # a plain SET: Redis' cheapest write of one document
            client.set(prefix + text(execution_id), document)

        return write

    def raw_side_commit(self) -> RawSideCommit:
        """The benchmarks' raw side commit: the ``SET`` of :meth:`raw_commit` plus an
        ``XADD`` of the event, a ``ZADD`` of the dedupe mark, a ``ZADD`` of the timer and an
        ``RPUSH`` of the trace step, on scratch keys (``<prefix>bench-raw:<id>:...``), in ONE
        ``MULTI``/``EXEC`` pipeline (one round trip) on a new client with the stores'
        settings; no version check, like the ``SET``."""
        client = self._raw()
        prefix = self.keys.prefix + b"bench-raw:"

        def write(execution_id: str, version: int, document: str, side: RawSide) -> None:
            del version
            key = prefix + text(execution_id)
            pipe = client.pipeline(transaction=True)
            pipe.set(key, document)
            pipe.xadd(key + b":outbox", {"e": side.emit, "t": execution_id})
            pipe.zadd(key + b":marks", {side.event_id: side.now})
            pipe.zadd(key + b":timers", {side.timer_path: side.fire_at})
            pipe.rpush(key + b":trace", side.trace)
            pipe.execute()

        return write

    def raw_script_commit(self) -> Callable[[str, int, str], None]:
        """Extra information for the benchmarks (not the issue's raw write): ONE ``EVALSHA``
        of the store's own state-only commit script (:data:`~harel_store_redis._scripts.
        COMMIT_STATE`: the version CAS, the document and its receipt, the summary row) on the
        execution's record, on a new client with the stores' settings (same arguments as
        ``raw_commit``).

        What it reads once per execution (its key names, status, listing-index field and
        summary row) it sends unchanged afterwards, so it measures the server's and the
        driver's cost of the very request a state-only commit sends, without the store's
        Python around it (the listing row keeps the first version's summary).
        """
        client = self._raw()
        known: dict[str, tuple[Any, ...]] = {}

        def write(execution_id: str, version: int, document: str) -> None:
            fixed = known.get(execution_id)
            if fixed is None:
                keys = self.keys_of(execution_id)  # its shard's, in the sharded layout
                names = keys.of(execution_id)
                status, index_field = client.hmget(names.execution, ["st", "ix"])
                row = client.hget(keys.summaries, names.raw_id)
                fixed = (names.execution, status, row, names.raw_id, index_field, keys.summaries)
                known[execution_id] = fixed
            execution_key, status, row, raw_id, index_field, summaries = fixed
            reply = client.evalsha(
                COMMIT_STATE.sha,
                2,
                execution_key,
                summaries,
                version,
                version + 1,
                document,
                b"raw",
                status,
                row,
                raw_id,
                index_field,
                receipt_field(version + 1),
                b"",  # no fence: the version alone decides, as for a copy from ``load``
                receipt_field(version),
            )
            if reply[0] != APPLIED:
                raise RuntimeError(f"raw commit of {execution_id!r} refused: {reply!r}")

        return write

    def destroy(self) -> None:
        """Close the stores the harness opened and delete every key of the namespace."""
        for store in list(self._sync):
            store.close()
        with self._client() as client:
            batch: list[bytes] = []
            for key in client.scan_iter(match=glob_escape(self.keys.prefix) + b"*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    client.unlink(*batch)
                    batch.clear()
            if batch:
                client.unlink(*batch)
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def describe(self) -> str:
        """``redis <server> (prefix ...)``."""
        return f"redis {self.options.where}"


def _item(member: bytes) -> str:
    _execution_id, _tag, item = split_owned(member)
    return untext(item)


def harness_from_url(url: str, workdir: Path) -> RedisHarness:
    """A harness over a NEW random prefix below the URL's own (``harel:`` by default).

    Nothing outside that prefix is read or written; ``workdir`` is not used.
    """
    del workdir
    return RedisHarness(url)
