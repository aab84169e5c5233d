"""The shared conformance kit, run against RqliteStore / AsyncRqliteStore (a fake rqlite node
per test, or the node HAREL_TEST_RQLITE_URL names)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestRqliteConformance(ConformanceSuite):
    """Every kit test, through the ``harel_harness`` fixture of conftest.py."""

    expected_failures: ClassVar[dict[str, str]] = {}
