"""Fixtures of the Redis backend's tests: the server to use and the conformance harness.

The server is ``HAREL_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``, the one on this
machine).  Every harness works under its own random key prefix and deletes its keys
afterwards, so runs never see each other's data.  An unreachable server skips these tests,
except with ``CI=true``, where it fails them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from harel.conformance.urls import in_ci
from harel_store_redis.testing import RedisHarness
from harel_testing.redis import RedisClusterProcess, RedisServerProcess

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def need_binaries(*names: str) -> None:
    """Skip (fail under CI=true) when one of the Redis binaries is missing."""
    for name in names:
        if shutil.which(name) is None:
            message = f"{name} is not installed (apt-get install redis-server)"
            if in_ci():
                pytest.fail(message)
            pytest.skip(message)


def start_cluster(workdir: Path) -> RedisClusterProcess:
    """A started private Redis Cluster (3 masters, 1 replica each) under ``workdir``: skip
    when it cannot start, fail under CI=true."""
    need_binaries("redis-server", "redis-cli")
    cluster = RedisClusterProcess(workdir)
    try:
        cluster.start()
    except RuntimeError as exc:
        message = f"the test Redis Cluster did not start: {exc}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: a cluster that cannot start fails the run)")
        pytest.skip(message)
    return cluster


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcess]:
    """One private Redis Cluster per test process (``redis-server --cluster-enabled yes`` on
    free loopback ports, in a temp dir), shared by its cluster tests and torn down at the
    end; every harness over it works under its own random prefix."""
    cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.remove()


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[RedisClusterProcess]:
    """A Redis Cluster of this test's own (one it may stop nodes of), removed afterwards."""
    cluster = start_cluster(tmp_path / "cluster")
    yield cluster
    cluster.remove()


def server_url() -> str:
    """The server the tests use."""
    return os.environ.get("HAREL_TEST_REDIS_URL") or DEFAULT_URL


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test server's URL, checked once: skip (fail under CI=true) when unreachable."""
    url = server_url()
    harness = RedisHarness(url)
    settings = {**harness.options.client_kwargs(), "socket_connect_timeout": 2}
    try:
        with redis.Redis(**settings) as client:
            client.ping()
    except redis.RedisError as exc:
        message = (
            f"no Redis server at {harness.describe()} ({type(exc).__name__}); "
            "start one or set HAREL_TEST_REDIS_URL"
        )
        if in_ci():
            pytest.fail(f"{message} (CI=true: an unreachable server fails the run)")
        pytest.skip(message)
    return url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def harel_harness(redis_url: str) -> Iterator[RedisHarness]:
    """A fresh, empty key namespace per test (the conformance kit's entry point)."""
    harness = RedisHarness(redis_url)
    yield harness
    harness.destroy()


@pytest.fixture
def redis_servers(tmp_path: Path) -> Iterator[Callable[..., RedisServerProcess]]:
    """Start private ``redis-server`` processes (removed after the test); skips (fails under
    CI=true) when the binary is missing."""
    need_binaries("redis-server")
    started: list[RedisServerProcess] = []

    def start(password: str | None = None) -> RedisServerProcess:
        server = RedisServerProcess(tmp_path / f"server-{len(started)}", password=password)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.remove()


@pytest.fixture
def throwaway_redis(redis_servers: Callable[..., RedisServerProcess]) -> RedisServerProcess:
    """A private Redis server for this test (the shared one is never stopped or flushed)."""
    return redis_servers()
