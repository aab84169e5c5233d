"""Fixtures of the DynamoDB backend's tests: one moto server per session, one table per harness.

The server is moto in server mode, started here on a free loopback port: the stores talk to it
over real HTTP through botocore/aiobotocore (nothing is patched in-process).
``HAREL_TEST_DYNAMODB_URL`` (e.g. ``dynamodb://any?endpoint_url=http://127.0.0.1:8000&local=true``
for DynamoDB Local) points every test at another endpoint instead; each harness still makes its
own table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harel_store_dynamodb._spec import SPEC
from harel_store_dynamodb.testing import DynamoDBHarness
from harel_testing.dynamodb import MotoServer

URL_VARIABLE = "HAREL_TEST_DYNAMODB_URL"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def dynamodb_target() -> Iterator[dict[str, Any]]:
    """How to reach the test server: harness keyword arguments (endpoint, region, ...)."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        _parsed, knobs, _retry = SPEC.parse_url(url)
        knobs.pop("create_table", None)
        knobs.pop("trace_max", None)
        knobs.pop("request_timeout", None)
        knobs.pop("max_attempts", None)
        knobs.setdefault("local", "false")
        yield knobs
        return
    server = MotoServer()
    try:
        yield {"endpoint_url": server.endpoint, "local": True, "region": "us-east-1"}
    finally:
        server.stop()


@pytest.fixture
def harel_harness(dynamodb_target: dict[str, Any], tmp_path: Path) -> Iterator[DynamoDBHarness]:
    """A fresh, empty table per test (the conformance kit's entry point)."""
    harness = DynamoDBHarness(**dynamodb_target)
    yield harness
    harness.destroy()


@pytest.fixture
def harness(dynamodb_target: dict[str, Any]) -> Iterator[DynamoDBHarness]:
    """A fresh, empty table for a backend-specific test."""
    h = DynamoDBHarness(**dynamodb_target)
    yield h
    h.destroy()
