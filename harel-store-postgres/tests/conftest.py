"""Fixtures of the PostgreSQL backend's tests: the server, the conformance harness, stores.

The server is ``HAREL_TEST_POSTGRES_URL`` when set, else the local one the spec declares
(``postgresql://postgres@127.0.0.1:5432/test``).  Every harness makes its own schema and drops
it afterwards.  An unreachable server skips these tests, except under ``CI=true``, where it
fails them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from harel.conformance.urls import in_ci, url_variable_for
from harel_store_postgres import AsyncPostgresStore, PostgresStore
from harel_store_postgres._spec import LOCAL_URL
from harel_store_postgres.testing import PostgresHarness

VARIABLE = url_variable_for("postgres")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The server URL the tests use (reachability checked once per session)."""
    url = os.environ.get(VARIABLE) or LOCAL_URL
    probe = PostgresHarness(url, connect_retries=0, reuse=False)
    try:
        with probe.connect():
            pass
    except (psycopg.Error, OSError) as exc:
        message = f"PostgreSQL at {probe.options.where} is unreachable ({exc}); set {VARIABLE}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: an unreachable server fails the run)")
        pytest.skip(message)
    return url


@pytest.fixture
def harel_harness(pg_url: str) -> Iterator[PostgresHarness]:
    """A fresh, empty schema per test (the conformance kit's entry point)."""
    harness = PostgresHarness(pg_url, connect_retries=2, reuse=True)
    yield harness
    harness.destroy()


@pytest.fixture
def store(harel_harness: PostgresHarness) -> Iterator[PostgresStore]:
    s = harel_harness.open_sync()
    yield s
    s.close()


@pytest.fixture
async def astore(harel_harness: PostgresHarness) -> AsyncIterator[AsyncPostgresStore]:
    s = await harel_harness.open_async()
    yield s
    await s.close()


Together = Callable[[Sequence[Callable[[], Any]]], list[Any]]


def _together(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on threads released together; each one's result or exception, in order."""
    barrier = threading.Barrier(len(calls))

    def released(call: Callable[[], Any]) -> Any:
        barrier.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(released, call) for call in calls]
    return [future.exception() or future.result() for future in futures]


@pytest.fixture
def together() -> Together:
    """``together(calls)``: run the calls at once on threads (races, concurrent openers)."""
    return _together


# -- a throwaway PostgreSQL server of our own (stopped and restarted by failure-mode tests) ----


def _bindir() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OwnServer:
    """A PostgreSQL cluster in a temporary directory on a free loopback port.

    Runs as the ``postgres`` user (via ``runuser``) when the tests run as root, since
    PostgreSQL refuses to run as root.  Never touches the shared server.
    """

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="harel-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self, *, fsync: bool = False) -> None:
        """Start the server (``fsync`` off unless asked: a setting of the command line, so
        chosen here)."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if fsync else 'off'} -c max_connections=50"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def own_server() -> Iterator[OwnServer]:
    """A private server the test may stop and start (skipped where none can be made)."""
    bindir = _bindir()
    if bindir is None:
        pytest.skip("no initdb/pg_ctl on this machine for a throwaway PostgreSQL server")
    try:
        server = OwnServer(bindir)
        server.start()
    except (subprocess.SubprocessError, OSError, KeyError) as exc:
        pytest.skip(f"cannot run a throwaway PostgreSQL server here: {exc}")
    yield server
    server.destroy()
