"""Lazy package exports: a backend's ``__init__`` names its store classes without importing
its driver, so importing the plugin module (or the package) stays cheap."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


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
