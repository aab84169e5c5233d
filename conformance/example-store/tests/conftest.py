"""The one fixture the conformance kit needs: a fresh, empty jsondir directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harel_example_jsondir.testing import JsonDirHarness


@pytest.fixture
def harel_harness(tmp_path: Path) -> Iterator[JsonDirHarness]:
    """An isolated, initially EMPTY jsondir directory (deleted after the test).

    ``fsync=False``: the kit checks the contract, not power-loss durability, and waiting for
    the disk on every file would dominate its run time; ``test_jsondir_specific`` runs the
    default ``fsync=True`` (and kills a writer after its commit point).
    """
    harness = JsonDirHarness(tmp_path / "jsondir", fsync=False)
    yield harness
    harness.destroy()
