"""Fixtures shared by harel-core's tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip, usable_backend_names
from harel.conformance.harness import StoreHarness
from harel.registry import harness_for_url
from harel.store.contract import ExecutionStore

OpenBackend = Callable[[str], tuple[ExecutionStore, str | None]]


@contextmanager
def _backend_opener(root: Path) -> Iterator[OpenBackend]:
    """``make(name)`` opening fresh datasets under ``root``; everything it opened is closed
    and dropped when the block ends."""
    harnesses: list[StoreHarness] = []
    stores: list[ExecutionStore] = []

    def make(name: str) -> tuple[ExecutionStore, str | None]:
        if name not in usable_backend_names():
            pytest.skip(f"store backend {name!r} is not installed")
        where = root / f"{name}-{len(harnesses)}"
        harness = harness_for_url(backend_test_url_or_skip(name, where / "data"), where / "kit")
        harnesses.append(harness)
        stores.append(harness.open_sync())
        return stores[-1], harness.url()

    try:
        yield make
    finally:
        for store in stores:
            store.close()
        for harness in harnesses:
            harness.destroy()


@pytest.fixture
def open_backend(tmp_path: Path) -> Iterator[OpenBackend]:
    """``open_backend(name)``: a sync store over a fresh, empty dataset of that backend and
    the dataset's URL (``None`` when another interpreter cannot open it); skips a backend
    that is not installed; closes the stores and drops the datasets afterwards."""
    with _backend_opener(tmp_path) as make:
        yield make


@pytest.fixture(scope="module")
def open_module_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenBackend]:
    """:func:`open_backend` for module-scoped fixtures: the datasets live until the module's
    last test has run (one dataset shared by a module's tests, e.g. behind one server)."""
    with _backend_opener(tmp_path_factory.mktemp("backends")) as make:
        yield make
