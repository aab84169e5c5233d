"""The shared conformance kit, run against LibsqlStore / AsyncLibsqlStore (one file per test)."""

from __future__ import annotations

from typing import ClassVar

from harel.conformance import ConformanceSuite


class TestLibsqlConformance(ConformanceSuite):
    """Every kit test, through the ``harel_harness`` fixture of conftest.py."""

    expected_failures: ClassVar[dict[str, str]] = {}
