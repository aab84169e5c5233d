"""pytest plugin of the conformance kit: options, hypothesis profiles, xfails, reporting.

Opt in with ``-p harel.conformance.plugin`` or ``pytest_plugins = ["harel.conformance.plugin"]``
in the ROOT ``conftest.py``; it is never auto-loaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from harel.conformance._rewrite import register_suite_for_rewrite
from harel.conformance.harness import StoreHarness
from harel.conformance.profiles import ENV_VAR, register_profiles

register_suite_for_rewrite()
register_profiles()

_DECLARED = pytest.StashKey[dict[str, str]]()
_KIT_ITEMS = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the kit's command-line options."""
    group = parser.getgroup("harel", "harel conformance kit")
    group.addoption("--harel-strict", action="store_true", help="capability skips fail")
    group.addoption("--harel-store-url", default=None, help="run the kit against this store URL")


def pytest_configure(config: pytest.Config) -> None:
    """Load the selected hypothesis profile and make sure anyio's plugin drives async tests."""
    if os.environ.get(ENV_VAR):
        settings.load_profile(os.environ[ENV_VAR])
    manager = config.pluginmanager
    if not manager.has_plugin("anyio") and not manager.is_blocked("anyio"):
        import anyio.pytest_plugin

        if not manager.is_registered(anyio.pytest_plugin):
            manager.register(anyio.pytest_plugin, "anyio")


def _suite_class(item: pytest.Item) -> type | None:
    from harel.conformance.suite._base import KitBase

    cls = getattr(item, "cls", None)
    return cls if isinstance(cls, type) and issubclass(cls, KitBase) else None


def _check_declared(cls: type, declared: dict[str, str]) -> None:
    for name, reason in declared.items():
        base = name.split("[", 1)[0]
        if not (base.startswith("test") and callable(getattr(cls, base, None))):
            raise pytest.UsageError(
                f"{cls.__name__}.expected_failures names {name!r}, which is not a kit test; "
                "use a test function name such as 'test_fire_at_bit_exact' (optionally with "
                "its [parameters])"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise pytest.UsageError(
                f"{cls.__name__}.expected_failures[{name!r}] needs a reason (a non-empty str)"
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Turn declared expected failures into strict xfails and remember them for the summary."""
    declared: dict[str, str] = {}
    kit_items = 0
    checked: set[type] = set()
    for item in items:
        cls = _suite_class(item)
        if cls is None:
            continue
        kit_items += 1
        expected: dict[str, str] = dict(getattr(cls, "expected_failures", {}) or {})
        if cls not in checked:
            _check_declared(cls, expected)
            checked.add(cls)
            for name, reason in expected.items():
                declared[f"{cls.__name__}.{name}"] = reason
        original = getattr(item, "originalname", item.name)
        why = expected.get(item.name, expected.get(original))
        if why is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"declared: {why}"))
    config.stash[_DECLARED] = declared
    config.stash[_KIT_ITEMS] = kit_items


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Count the declared expected failures of every collected kit suite."""
    config = terminalreporter.config
    if not config.stash.get(_KIT_ITEMS, 0):
        return
    declared = config.stash.get(_DECLARED, {})
    line = f"harel conformance: {len(declared)} expected failure(s) declared"
    if declared:
        line += ": " + "; ".join(f"{name} ({reason})" for name, reason in sorted(declared.items()))
    if config.getoption("harel_strict", default=False):
        line += " [strict]"
    terminalreporter.write_sep("-", "harel conformance")
    terminalreporter.write_line(line)


@pytest.fixture
def harel_harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHarness]:
    """The harness for ``--harel-store-url`` (a backend's own conftest fixture overrides this)."""
    url = request.config.getoption("harel_store_url", default=None)
    if not url:
        pytest.fail(
            "no `harel_harness` fixture: define one in your conftest.py (a function-scoped "
            "fixture returning a fresh, empty StoreHarness) or pass --harel-store-url URL",
            pytrace=False,
        )
    from harel.registry import harness_for_url

    harness = harness_for_url(url, tmp_path)
    try:
        yield harness
    finally:
        harness.destroy()
