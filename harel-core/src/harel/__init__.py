"""harel: durable statechart executions with pluggable persistence.

Every public name is imported on first use (module ``__getattr__``), so ``import harel`` —
and a backend's ``_plugin`` module, which imports ``harel.registry`` — loads neither the
engine nor any store.  Backend store classes (``SqliteStore``, ``PostgresStore``, ...) are
not imported by core: ``from harel import SqliteStore`` asks the plugin registry, and names
the distribution to install when the backend is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harel.engine import (
        AsyncDurableRunner,
        DslError,
        DurableRunner,
        definition_from_dsl,
        definition_from_dsl_file,
    )
    from harel.model import (
        ChildState,
        Event,
        Execution,
        ExecutionPage,
        ExecutionSummary,
        Status,
    )
    from harel.store import (
        DEFAULT_TRACE_MAX,
        AsyncDictStore,
        AsyncExecutionStore,
        DictStore,
        ExecutionAlreadyExists,
        ExecutionNotFound,
        ExecutionStore,
        OutboxEntry,
        SpawnEntry,
        StoreConflict,
        StoreError,
        TimerOp,
    )

__version__ = "0.1.0"
"""harel-core's version, written only here: hatchling reads it into the distribution's
metadata (``[tool.hatch.version]`` in harel-core/pyproject.toml)."""

_HOMES = {
    "harel.engine": (
        "AsyncDurableRunner",
        "DslError",
        "DurableRunner",
        "definition_from_dsl",
        "definition_from_dsl_file",
    ),
    "harel.model": (
        "ChildState",
        "Event",
        "Execution",
        "ExecutionPage",
        "ExecutionSummary",
        "Status",
    ),
    "harel.store": (
        "DEFAULT_TRACE_MAX",
        "AsyncDictStore",
        "AsyncExecutionStore",
        "DictStore",
        "ExecutionAlreadyExists",
        "ExecutionNotFound",
        "ExecutionStore",
        "OutboxEntry",
        "SpawnEntry",
        "StoreConflict",
        "StoreError",
        "TimerOp",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncDictStore",
    "AsyncDurableRunner",
    "AsyncExecutionStore",
    "ChildState",
    "DictStore",
    "DslError",
    "DurableRunner",
    "Event",
    "Execution",
    "ExecutionAlreadyExists",
    "ExecutionNotFound",
    "ExecutionPage",
    "ExecutionStore",
    "ExecutionSummary",
    "OutboxEntry",
    "SpawnEntry",
    "Status",
    "StoreConflict",
    "StoreError",
    "TimerOp",
    "definition_from_dsl",
    "definition_from_dsl_file",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its home module on first use; resolve backend store
    classes (e.g. ``SqliteStore``) through the registry."""
    module = _MODULE_OF.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    from harel.registry._select import resolve_public_name

    return resolve_public_name(name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
