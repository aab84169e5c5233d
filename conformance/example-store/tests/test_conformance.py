"""The shared conformance kit, run against jsondir (sync and async) through ``harel_harness``."""

from __future__ import annotations

from harel.conformance import ConformanceSuite


class TestJsonDirConformance(ConformanceSuite):
    """Every kit test; jsondir declares no deviation."""

    expected_failures: dict[str, str] = {}
