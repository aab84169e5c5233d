"""The shared conformance kit against DynamoDBStore / AsyncDynamoDBStore (a table per test)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestDynamoDBConformance(ConformanceSuite):
    """Every kit test, through the ``harel_harness`` fixture of conftest.py (strict, no xfail)."""

    expected_failures: ClassVar[dict[str, str]] = {}
