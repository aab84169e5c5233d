"""The one fixture the conformance kit needs: a fresh, empty dataset per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harel_tutorial_store.testing import TutorialHarness


@pytest.fixture
def harel_harness() -> Iterator[TutorialHarness]:
    """An isolated, initially EMPTY dataset (forgotten after the test)."""
    harness = TutorialHarness()
    yield harness
    harness.destroy()
