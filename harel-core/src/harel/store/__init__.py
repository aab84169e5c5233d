"""The store contract, its shared helpers and the in-memory reference stores."""

from typing import TYPE_CHECKING, Any

from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    Capabilities,
    Claim,
    ExecutionStore,
    Lease,
    OutboxEntry,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import (
    AlreadyProcessed,
    CommitOutcomeUnknown,
    ExecutionAlreadyExists,
    ExecutionNotFound,
    InvalidCursor,
    InvalidPayload,
    InvalidStoreURL,
    LeaseLost,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from harel.store.memory import AsyncDictStore, DictStore


def __getattr__(name: str) -> Any:
    # the memory stores load on first use, so importing harel.store imports no store module
    if name in ("DictStore", "AsyncDictStore"):
        from harel.store import memory

        return getattr(memory, name)
    raise AttributeError(f"module 'harel.store' has no attribute {name!r}")


__all__ = [
    "DEFAULT_TRACE_MAX",
    "AlreadyProcessed",
    "AsyncDictStore",
    "AsyncExecutionStore",
    "Capabilities",
    "Claim",
    "CommitOutcomeUnknown",
    "DictStore",
    "ExecutionAlreadyExists",
    "ExecutionNotFound",
    "ExecutionStore",
    "InvalidCursor",
    "InvalidPayload",
    "InvalidStoreURL",
    "Lease",
    "LeaseLost",
    "OutboxEntry",
    "PayloadTooLarge",
    "SchemaVersionError",
    "SpawnEntry",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "TimerOp",
]
