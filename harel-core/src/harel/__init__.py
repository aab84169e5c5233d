"""harel: durable statechart executions with pluggable persistence.

Backend store classes (``SqliteStore``, ``PostgresStore``, ...) are not imported by core:
``from harel import SqliteStore`` asks the plugin registry, and names the distribution to
install when the backend is missing.
"""

from __future__ import annotations

from typing import Any

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
    """Resolve backend store classes (e.g. ``SqliteStore``) lazily through the registry."""
    from harel.registry import resolve_public_name

    return resolve_public_name(name)
