"""Fixtures of the rqlite backend's tests: the conformance harness and fake nodes.

Without ``HAREL_TEST_RQLITE_URL`` every harness starts its own fake rqlite node
(:mod:`harel_testing.rqlite`: rqlite's HTTP API over SQLite, in a thread of the
test process) on a free loopback port; with it, the kit runs against that real rqlite node
(which must be disposable: the harness drops the harel tables).  Tests of this folder that
need to stop, restart, redirect or de-lead a node always use fake nodes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harel_store_rqlite.testing import LOCAL_FAKE_URL, RqliteHarness, harness_from_url
from harel_testing.rqlite import FakeRqlite

URL_VARIABLE = "HAREL_TEST_RQLITE_URL"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def harel_harness(tmp_path: Path) -> Iterator[RqliteHarness]:
    """A fresh, empty rqlite database per test (the conformance kit's entry point)."""
    harness = harness_from_url(os.environ.get(URL_VARIABLE) or LOCAL_FAKE_URL, tmp_path)
    yield harness
    harness.destroy()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FakeRqlite]:
    """A running fake rqlite node over a new file (its request log starts empty)."""
    with FakeRqlite(tmp_path / "node.db") as fake:
        yield fake
