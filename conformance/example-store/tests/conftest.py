"""The one fixture the conformance kit needs: a fresh, empty jsondir directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harel_example_jsondir.testing import JsonDirHarness


@pytest.fixture
def harel_harness(tmp_path: Path) -> Iterator[JsonDirHarness]:
    """An isolated, initially EMPTY jsondir directory (deleted after the test)."""
    harness = JsonDirHarness(tmp_path / "jsondir")
    yield harness
    harness.destroy()
