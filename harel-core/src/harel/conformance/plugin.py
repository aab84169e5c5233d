"""pytest plugin of the conformance kit (options, hypothesis profiles, reporting)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the kit's command-line options."""
    group = parser.getgroup("harel", "harel conformance kit")
    group.addoption("--harel-strict", action="store_true", help="capability skips fail")
    group.addoption("--harel-store-url", default=None, help="run the kit against this store URL")
