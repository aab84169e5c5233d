"""Register the kit's test modules for pytest's assertion rewriting (so failures show values)."""

from __future__ import annotations

import importlib.util
import pkgutil
import sys

_LISTED = (
    "harel.conformance.suite._base",
    "harel.conformance.suite._processes",
    "harel.conformance.suite.bad_input",
    "harel.conformance.suite.commits",
    "harel.conformance.suite.concurrency",
    "harel.conformance.suite.contract",
    "harel.conformance.suite.dedupe",
    "harel.conformance.suite.durability",
    "harel.conformance.suite.listing",
    "harel.conformance.suite.relays",
    "harel.conformance.suite.retention",
    "harel.conformance.suite.stateful",
    "harel.conformance.suite.timers",
    "harel.conformance.suite.trace",
    "harel.conformance._url_suite",
)


def _suite_modules() -> tuple[str, ...]:
    """Every module of ``harel.conformance.suite`` (found without importing it) and the URL
    suite: a new suite module is rewritten without being listed here."""
    found = list(_LISTED)
    spec = importlib.util.find_spec("harel.conformance.suite")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for info in pkgutil.iter_modules(locations):
        name = f"harel.conformance.suite.{info.name}"
        if name not in found:
            found.append(name)
    return tuple(found)


SUITE_MODULES = _suite_modules()
"""The modules whose ``assert`` statements pytest rewrites (failures show both values)."""


def register_suite_for_rewrite() -> None:
    """Mark the suite modules not imported yet; a no-op outside a pytest process."""
    pytest = sys.modules.get("pytest")
    if pytest is None:
        return
    pending = [name for name in SUITE_MODULES if name not in sys.modules]
    if pending:
        pytest.register_assert_rewrite(*pending)
