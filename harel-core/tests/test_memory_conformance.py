"""The conformance kit against the in-memory reference stores (DictStore / AsyncDictStore)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from harel.conformance import ConformanceSuite
from harel.store.memory.testing import MemoryHarness


@pytest.fixture
def harel_harness() -> Iterator[MemoryHarness]:
    harness = MemoryHarness()
    yield harness
    harness.destroy()


class TestMemoryConformance(ConformanceSuite):
    """DictStore and AsyncDictStore pass the whole kit, strict, with no expected failures."""

    expected_failures: ClassVar[dict[str, str]] = {}
