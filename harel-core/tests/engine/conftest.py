"""Fixtures of the engine tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip
from harel.conformance.urls import in_ci
from harel.registry import harness_for_url


@pytest.fixture
def isolated_url(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``isolated_url(backend)``: a URL over a fresh, empty dataset of that backend, which
    another interpreter can open too (the backend's harness derives it from its test URL and
    drops it afterwards), so a shared server never leaks data between runs."""
    harnesses = []

    def make(backend: str) -> str:
        base = backend_test_url_or_skip(backend, tmp_path / "data")
        harness = harness_for_url(base, tmp_path / f"kit-{len(harnesses)}")
        harnesses.append(harness)
        url = harness.url()
        if url is None:
            message = f"the {backend} harness offers no URL another interpreter can open"
            if in_ci():
                pytest.fail(message)
            pytest.skip(message)
        return url

    yield make
    for harness in harnesses:
        harness.destroy()
