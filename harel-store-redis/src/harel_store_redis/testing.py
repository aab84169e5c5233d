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
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from harel.conformance.harness import RawSide, RawSideCommit, StoreHarness
from harel.store.contract import Capabilities

from harel_store_redis._capabilities import CAPABILITIES
from harel_store_redis._keys import owner_prefix, seq_of, split_owned, text, untext
from harel_store_redis._options import parse_redis_url
from harel_store_redis._schema import Keys, receipt_field
from harel_store_redis._scripts import APPLIED, COMMIT_STATE
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
        options, _connect = parse_redis_url(url, {})
        self.prefix = prefix or f"{options.prefix}kit-{uuid.uuid4().hex[:16]}:"
        self._url = with_prefix(url, self.prefix)
        self.options, _ = parse_redis_url(self._url, {})
        self.keys = Keys(self.prefix.encode("utf-8"))
        self._sync: weakref.WeakSet[RedisStore] = weakref.WeakSet()
        self._async: weakref.WeakSet[AsyncRedisStore] = weakref.WeakSet()

    def _raw(self) -> redis.Redis:
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
        """The server's TCP address (``None`` over a unix socket)."""
        if self.options.unix_path is not None:
            return None
        return self.options.host, self.options.port

    def open_sync_at(self, host: str, port: int) -> RedisStore:
        """A new ``RedisStore`` over the namespace through ``host:port`` (a proxy in front of
        the server), with :data:`PROXIED_KNOBS`."""
        store = RedisStore.from_url(with_address(self._url, host, port), **PROXIED_KNOBS)
        self._sync.add(store)
        return store

    async def open_async_at(self, host: str, port: int) -> AsyncRedisStore:
        """The async twin of :meth:`open_sync_at`."""
        url = with_address(self._url, host, port)
        store = await AsyncRedisStore.from_url(url, **PROXIED_KNOBS)
        self._async.add(store)
        return store

    def footprint(self, execution_id: str) -> list[str]:
        """Every record of ``execution_id`` under the namespace, read with plain commands."""
        keys = self.keys
        labels: list[str] = []
        owner = owner_prefix(execution_id)
        raw_id = text(execution_id)
        with self._raw() as client:
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
        with self._raw() as client:
            return sorted(client.scan_iter(match=glob_escape(self.keys.prefix) + b"*", count=1000))

    def dump(self) -> dict[bytes, Any]:
        """Every key under the namespace with its whole content (for before/after checks)."""
        out: dict[bytes, Any] = {}
        with self._raw() as client:
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
        keys = self.keys
        known: dict[str, tuple[Any, ...]] = {}

        def write(execution_id: str, version: int, document: str) -> None:
            fixed = known.get(execution_id)
            if fixed is None:
                names = keys.of(execution_id)
                status, index_field = client.hmget(names.execution, ["st", "ix"])
                row = client.hget(keys.summaries, names.raw_id)
                fixed = (names.execution, status, row, names.raw_id, index_field)
                known[execution_id] = fixed
            execution_key, status, row, raw_id, index_field = fixed
            reply = client.evalsha(
                COMMIT_STATE.sha,
                2,
                execution_key,
                keys.summaries,
                version,
                version + 1,
                document,
                b"raw",
                status,
                row,
                raw_id,
                index_field,
                receipt_field(version + 1),
            )
            if reply[0] != APPLIED:
                raise RuntimeError(f"raw commit of {execution_id!r} refused: {reply!r}")

        return write

    def destroy(self) -> None:
        """Close the stores the harness opened and delete every key of the namespace."""
        for store in list(self._sync):
            store.close()
        with self._raw() as client:
            batch: list[bytes] = []
            for key in client.scan_iter(match=glob_escape(self.keys.prefix) + b"*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    client.unlink(*batch)
                    batch.clear()
            if batch:
                client.unlink(*batch)

    def describe(self) -> str:
        """``redis <server> (prefix ...)``."""
        return f"redis {self.options.where}"


def _item(member: bytes) -> str:
    _execution_id, _tag, item = split_owned(member)
    return untext(item)


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
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

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
