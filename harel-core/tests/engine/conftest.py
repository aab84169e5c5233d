"""Fixtures of the engine tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harel.conformance import backend_test_url_or_skip
from harel.registry import harness_for_url


@pytest.fixture
def isolated_url(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``isolated_url(backend)``: a URL over a fresh, empty dataset of that backend, which
    another interpreter can open too (the backend's harness derives it from its test URL and
    drops it afterwards), so a shared server never leaks data between runs.  Skips (naming the
    reason) for a backend whose harness has no such URL (an in-process test double)."""
    harnesses = []

    def make(backend: str) -> str:
        base = backend_test_url_or_skip(backend, tmp_path / "data")
        harness = harness_for_url(base, tmp_path / f"kit-{len(harnesses)}")
        harnesses.append(harness)
        url = harness.url()
        if url is None:  # not an unreachable server: a backend tested through an in-process
            # double (e.g. mongomock) cannot be opened by another interpreter at all
            pytest.skip(f"the {backend} harness offers no URL another interpreter can open")
        return url

    yield make
    for harness in harnesses:
        harness.destroy()
