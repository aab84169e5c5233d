"""Fixtures shared by harel-core's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip, usable_backend_names
from harel.conformance.harness import StoreHarness
from harel.registry import harness_for_url
from harel.store.contract import ExecutionStore

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]


@pytest.fixture
def open_backend(tmp_path: Path) -> Iterator[OpenBackend]:
    """``open_backend(name)``: a sync store over a fresh, empty dataset of that backend and
    the dataset's URL (``None`` when another interpreter cannot open it); skips a backend
    that is not installed; closes the stores and drops the datasets afterwards."""
    harnesses: list[StoreHarness] = []
    stores: list[ExecutionStore] = []

    def make(name: str) -> tuple[ExecutionStore, str | None]:
        if name not in usable_backend_names():
            pytest.skip(f"store backend {name!r} is not installed")
        where = tmp_path / f"{name}-{len(harnesses)}"
        harness = harness_for_url(backend_test_url_or_skip(name, where / "data"), where / "kit")
        harnesses.append(harness)
        stores.append(harness.open_sync())
        return stores[-1], harness.url()

    yield make
    for store in stores:
        store.close()
    for harness in harnesses:
        harness.destroy()
