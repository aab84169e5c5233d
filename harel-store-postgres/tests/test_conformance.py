"""The shared conformance kit, strict, against PostgresStore / AsyncPostgresStore on a real
server (one fresh schema per test)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestPostgresConformance(ConformanceSuite):
    """Every kit test, through the ``harel_harness`` fixture of conftest.py."""

    expected_failures: ClassVar[dict[str, str]] = {}
