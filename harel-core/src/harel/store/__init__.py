"""The store contract, its shared helpers and the in-memory reference stores."""

from harel.store.contract import (
    DEFAULT_TRACE_MAX,
    AsyncExecutionStore,
    Capabilities,
    ExecutionStore,
    OutboxEntry,
    SpawnEntry,
    TimerOp,
)
from harel.store.errors import (
    ExecutionAlreadyExists,
    ExecutionNotFound,
    InvalidCursor,
    InvalidPayload,
    InvalidStoreURL,
    PayloadTooLarge,
    SchemaVersionError,
    StoreConflict,
    StoreError,
    StoreUnavailable,
)
from harel.store.memory import AsyncDictStore, DictStore

__all__ = [
    "DEFAULT_TRACE_MAX",
    "AsyncDictStore",
    "AsyncExecutionStore",
    "Capabilities",
    "DictStore",
    "ExecutionAlreadyExists",
    "ExecutionNotFound",
    "ExecutionStore",
    "InvalidCursor",
    "InvalidPayload",
    "InvalidStoreURL",
    "OutboxEntry",
    "PayloadTooLarge",
    "SchemaVersionError",
    "SpawnEntry",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "TimerOp",
]
