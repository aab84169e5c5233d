"""Conformance-kit support: one random key prefix per harness on a Redis server.

``RedisHarness(url)`` gives the kit stores over ``<url's prefix>kit-<random>:``; every
``open_sync()`` / ``open_async()`` is a new store object (its own connection pool) over that
namespace.  ``footprint`` reads the keys directly; ``destroy()`` closes what the harness opened
and deletes every key under the namespace.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
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
from harel_store_redis._schema import Keys, receipt_field
from harel_store_redis._scripts import APPLIED, COMMIT_STATE
from harel_store_redis._shards import ShardMap
from harel_store_redis._spec import CAPABILITIES, open_options
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


def terminate(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a running server process and wait for it (SIGKILL after 20 s)."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class RedisServerProcess:
    """A private ``redis-server`` on a free loopback port (and a unix socket), append-only file
    fsynced on every write, for tests that stop, restart or flush a server.

    ``start()`` waits until it answers (after a restart: until it has loaded its data);
    ``stop()`` shuts it down (SIGTERM); ``remove()`` also deletes its socket directory.  Its
    data directory is ``workdir``, so a restart on the same port finds the same data.
    """

    def __init__(self, workdir: Path, *, password: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.password = password
        self.port = free_port()
        # a short path: unix socket paths are limited to about 100 bytes
        self.socket = Path(tempfile.mkdtemp(prefix="harel-redis-")) / "s.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` (no credentials)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Start the server and wait until it answers ``PING``."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            binary,
            *("--bind", "127.0.0.1", "--port", str(self.port)),
            *("--unixsocket", str(self.socket), "--unixsocketperm", "700"),
            *("--dir", str(self.workdir), "--save", ""),
            *("--appendonly", "yes", "--appendfsync", "always"),
            *("--daemonize", "no", "--loglevel", "warning", "--protected-mode", "no"),
        ]
        if self.password is not None:
            command += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return
            except redis.RedisError:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"redis-server exited with status {self.process.returncode}"
                    ) from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer within {timeout} s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut the server down (its append-only file keeps the data)."""
        process, self.process = self.process, None
        terminate(process)

    def remove(self) -> None:
        """Stop the server and delete its socket directory."""
        self.stop()
        shutil.rmtree(self.socket.parent, ignore_errors=True)

    def client(self) -> redis.Redis:
        """A plain redis-py client of this server."""
        return redis.Redis(port=self.port, password=self.password, socket_connect_timeout=0.5)


def free_port() -> int:
    """A loopback TCP port nothing listens on (right now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def harness_from_url(url: str, workdir: Path) -> RedisHarness:
    """A harness over a NEW random prefix below the URL's own (``harel:`` by default).

    Nothing outside that prefix is read or written; ``workdir`` is not used.
    """
    del workdir
    return RedisHarness(url)


CLUSTER_NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout`` of a test cluster: a stopped master is marked failed (and its
replica elected) within a few seconds."""


class RedisClusterProcess:
    """A private Redis Cluster on loopback ports: ``masters`` masters, each with ``replicas``
    replicas, started from the same ``redis-server`` binary as :class:`RedisServerProcess`
    (``--cluster-enabled yes``), joined with ``redis-cli --cluster create`` and torn down by
    :meth:`remove`.

    Every node has its own data directory under ``workdir`` and a free client port and cluster
    bus port (``cluster-port``).  ``cluster-require-full-coverage no``: while a master is down
    only its slots refuse commands, the others go on.  No persistence (replication is what a
    failover relies on).
    """

    def __init__(self, workdir: Path, *, masters: int = 3, replicas: int = 1) -> None:
        self.workdir = Path(workdir)
        self.masters = masters
        self.replicas = replicas
        self.ports: list[int] = []
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<first node>/0?cluster=yes`` (the client discovers the rest)."""
        return f"redis://127.0.0.1:{self.ports[0]}/0?cluster=yes"

    def _binary(self, name: str) -> str:
        found = shutil.which(name)
        if found is None:
            raise RuntimeError(f"{name} is not installed (apt-get install redis-server)")
        return found

    def _start_node(self, port: int, bus_port: int) -> None:
        directory = self.workdir / f"node-{port}"
        directory.mkdir(parents=True, exist_ok=True)
        command = [
            self._binary("redis-server"),
            *("--bind", "127.0.0.1", "--port", str(port), "--cluster-port", str(bus_port)),
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)),
            *("--cluster-require-full-coverage", "no"),
            *("--cluster-replica-validity-factor", "0"),
            *("--dir", str(directory), "--save", "", "--appendonly", "no"),
            *("--daemonize", "no", "--loglevel", "warning", "--protected-mode", "no"),
        ]
        self.processes[port] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start every node, join them into one cluster and wait until it serves every slot
        and every replica is in sync (``RuntimeError`` when it does not within ``timeout``)."""
        deadline = time.monotonic() + timeout
        count = self.masters * (1 + self.replicas)
        try:
            for _ in range(count):
                self.ports.append(self._start_on_free_ports(deadline))
            if self.masters < 3:  # redis-cli creates clusters of 3 masters or more
                self._join_by_hand(deadline)
                self.wait_healthy(deadline - time.monotonic())
                return
            create = [
                self._binary("redis-cli"),
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                *("--cluster-replicas", str(self.replicas), "--cluster-yes"),
            ]
            done = subprocess.run(
                create,
                capture_output=True,
                timeout=max(deadline - time.monotonic(), 1.0),
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"redis-cli --cluster create failed ({done.returncode}): "
                    f"{done.stdout[-400:]!r} {done.stderr[-400:]!r}"
                )
            self.wait_healthy(deadline - time.monotonic())
        except BaseException:
            self.remove()
            raise

    def _start_on_free_ports(self, deadline: float, attempts: int = 5) -> int:
        """Start one node on a free client port and a free bus port and wait until it answers;
        a port taken between the probe and the bind (another test's connection, a node of
        another cluster) makes the node exit at once: then again on other ports."""
        for attempt in range(attempts):
            taken = set(self.ports)
            port = free_port()
            bus_port = free_port()
            if port in taken or bus_port in taken or port == bus_port:
                continue
            self._start_node(port, bus_port)
            try:
                self._wait_pong(port, deadline)
                ours = (self.workdir / f"node-{port}").resolve()
                if Path(self._answers_from(port)).resolve() == ours:
                    return port
                # another server already listened on that port, and answered
                self.processes.pop(port).kill()
                continue
            except RuntimeError:
                process = self.processes.pop(port)
                if process.poll() is None or attempt + 1 == attempts:
                    process.kill()
                    process.wait()
                    raise
        raise RuntimeError("no free ports for a cluster node")

    def _answers_from(self, port: int) -> str:
        """The data directory of the server answering on ``port``."""
        with self.node_client(port) as client:
            found: dict[str, str] = client.config_get("dir")
        return str(found.get("dir", ""))

    def _join_by_hand(self, deadline: float) -> None:
        """Fewer than 3 masters: split the slots over the masters, meet every node, and make
        the others replicas (``CLUSTER ADDSLOTSRANGE``, ``MEET``, ``REPLICATE``)."""
        masters, replicas = self.ports[: self.masters], self.ports[self.masters :]
        for index, port in enumerate(masters):
            low = index * 16384 // self.masters
            high = (index + 1) * 16384 // self.masters - 1
            with self.node_client(port) as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", low, high)
        with self.node_client(self.ports[0]) as first:
            for port in self.ports[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        ids = {}
        for port in masters:
            with self.node_client(port) as client:
                ids[port] = client.execute_command("CLUSTER", "MYID").decode()
        for index, port in enumerate(replicas):
            master = masters[index % len(masters)]
            while True:  # the replica must know its master before it can follow it
                try:
                    with self.node_client(port) as client:
                        client.execute_command("CLUSTER", "REPLICATE", ids[master])
                    break
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def _wait_pong(self, port: int, deadline: float) -> None:
        while True:
            try:
                with self.node_client(port) as client:
                    client.ping()
                return
            except redis.RedisError:
                process = self.processes[port]
                if process.poll() is not None:
                    raise RuntimeError(
                        f"redis-server on port {port} exited with status {process.returncode}"
                    ) from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {port} did not answer") from None
                time.sleep(0.05)

    def node_client(self, port: int) -> redis.Redis:
        """A plain client of one node (no cluster routing)."""
        return redis.Redis(port=port, socket_connect_timeout=0.5, socket_timeout=5)

    def running(self) -> list[int]:
        """The ports of the nodes that are still running."""
        return [port for port, process in self.processes.items() if process.poll() is None]

    def roles(self) -> dict[int, str]:
        """``port -> "master" | "slave"`` as the running nodes report themselves."""
        roles: dict[int, str] = {}
        for port in self.running():
            with self.node_client(port) as client:
                roles[port] = str(client.execute_command("ROLE")[0], "ascii")
        return roles

    def master_ports(self) -> list[int]:
        """The running masters' ports."""
        return sorted(port for port, role in self.roles().items() if role == "master")

    def master_of(self, slot: int) -> int:
        """The port of the master serving ``slot`` (as the first running node sees it)."""
        with self.node_client(self.running()[0]) as client:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
        raise RuntimeError(f"no node serves slot {slot}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, every slot is served by a
        running master and every running replica's link to its master is up."""
        deadline = time.monotonic() + timeout
        problem = "not checked yet"
        while time.monotonic() < deadline:
            problem = self._health()
            if not problem:
                return
            time.sleep(0.1)
        raise RuntimeError(f"the test cluster did not become healthy: {problem}")

    def _health(self) -> str:
        running = set(self.running())
        try:
            for port in running:
                with self.node_client(port) as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    if "cluster_state:ok" not in text:
                        return f"node {port}: cluster state not ok"
                    replication = client.info("replication")
                    if replication.get("role") == "slave" and (
                        replication.get("master_link_status") != "up"
                        or int(replication.get("master_port", 0)) not in running
                    ):
                        return f"replica {port}: link to its master is not up"
                    for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                        if int(master[1]) not in running:
                            return f"node {port}: slots {start}-{end} still on a stopped master"
        except redis.RedisError as exc:
            return f"{type(exc).__name__}: {exc}"
        return ""

    def stop_node(self, port: int) -> None:
        """Shut one node down (SIGTERM: a master first lets its replicas catch up)."""
        terminate(self.processes.get(port))

    def remove(self) -> None:
        """Stop every node and delete the data directories."""
        for port in list(self.processes):
            self.stop_node(port)
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)
