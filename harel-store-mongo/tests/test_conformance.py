"""The shared conformance kit, run against MongoStore / AsyncMongoStore (mongomock by default,
a real server with HAREL_TEST_MONGO_URL; a fresh database per test)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestMongoConformance(ConformanceSuite):
    """Every kit test, through the ``harel_harness`` fixture of conftest.py."""

    expected_failures: ClassVar[dict[str, str]] = {}
