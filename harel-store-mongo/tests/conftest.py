"""Fixtures of the MongoDB backend's tests: the dataset each test gets.

No MongoDB server can be installed on the test machines, so by default every test runs on an
in-process mongomock dataset (mongomock-motor for the async store), a fresh one per test.
``HAREL_TEST_MONGO_URL=mongodb://...`` runs the very same tests against that server instead
(a random database per test, dropped afterwards); an unreachable server then skips them, or
fails them under ``CI=true``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from harel.conformance.harness import StoreHarness
from harel.conformance.urls import in_ci
from harel_store_mongo.testing import MongomockHarness, MongoServerHarness

URL_VARIABLE = "HAREL_TEST_MONGO_URL"


def server_url() -> str | None:
    """The real server the tests use, if any."""
    return os.environ.get(URL_VARIABLE) or None


@pytest.fixture(scope="session")
def mongo_url() -> str | None:
    """The real server's URL (checked once), or ``None`` for mongomock."""
    url = server_url()
    if url is None:
        return None
    import pymongo

    harness = MongoServerHarness(url)
    try:
        with pymongo.MongoClient(
            harness.options.driver_uri, serverSelectionTimeoutMS=3000
        ) as client:
            client.admin.command("ping")
    except pymongo.errors.PyMongoError as exc:
        message = f"no MongoDB server at {harness.describe()} ({type(exc).__name__})"
        if in_ci():
            pytest.fail(f"{message} (CI=true: an unreachable server fails the run)")
        pytest.skip(message)
    return url


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_harness(url: str | None) -> MongomockHarness | MongoServerHarness:
    """A fresh, empty dataset: mongomock, or a new database on the real server."""
    return MongomockHarness() if url is None else MongoServerHarness(url)


@pytest.fixture
def harel_harness(mongo_url: str | None) -> Iterator[StoreHarness]:
    """A fresh, empty dataset per test (the conformance kit's entry point)."""
    harness = make_harness(mongo_url)
    yield harness
    harness.destroy()


@pytest.fixture
def harness(harel_harness: StoreHarness) -> StoreHarness:
    """The test's dataset (``harel_harness`` under the name the backend's own tests use)."""
    return harel_harness


@pytest.fixture
def other_harness(mongo_url: str | None) -> Iterator[StoreHarness]:
    """A second fresh, empty dataset (a migration's destination)."""
    harness = make_harness(mongo_url)
    yield harness
    harness.destroy()
