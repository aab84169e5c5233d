"""Lazy imports: a backend's ``__init__`` names its store classes without importing its
driver, so importing the plugin module (or the package) stays cheap; a backend's test support
imports what lives in the test-only ``harel-testing`` distribution only when it is used."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import import_module
from typing import Any

from harel.store.errors import HarelTestingNotInstalled


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a module path)
    on first access of ``name``, caches the value in the package and returns it; any other
    name raises ``AttributeError`` as a missing attribute does.

    Use: ``__getattr__ = lazy_exports(__name__, {"MyStore": "my_pkg.sync"})``.
    """
    table = dict(exports)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


@contextmanager
def needs_harel_testing(extra: str, *packages: str) -> Iterator[None]:
    """Imports in the ``with`` block that fail because ``harel_testing`` (or one of
    ``packages``, the top-level packages its ``extra`` brings) is missing raise
    :class:`~harel.store.errors.HarelTestingNotInstalled` naming
    ``pip install harel-testing[extra]``; any other import error propagates unchanged.

    Use::

        with needs_harel_testing("mongo", "mongomock"):
            import mongomock
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing != "harel_testing" and missing not in packages:
            raise
        raise HarelTestingNotInstalled(exc.name or missing, extra) from exc
