"""Checks of what figure 3 relies on (run with ``pytest bench``; not part of ``make test``).

Figure 3 fills its datasets by import (and, on DynamoDB, by its fast path) instead of commits;
that is fair only while an imported execution is stored exactly like a committed one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import growth
import pytest
from common import open_harness, targets

BACKENDS = targets(Path(tempfile.gettempdir(), "harel-bench-tests"), every_setting=False)


@pytest.fixture(params=BACKENDS, ids=lambda t: t.backend)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with open_harness(request.param, tmp_path) as harness:
        opened = harness.open_sync()
        try:
            yield opened, request.param.backend
        finally:
            opened.close()


def test_the_population_stores_what_commits_store(store: tuple[Any, str]) -> None:
    opened, backend = store
    how = growth.POPULATION.get(backend, growth.Population())
    growth.populate(opened, 0, 4, how)  # raises PopulationMismatch when import != commit
    shapes = [growth._shape(opened, n) for n in range(4)]
    assert all(shape == shapes[0] for shape in shapes), f"{backend}: they differ: {shapes}"
