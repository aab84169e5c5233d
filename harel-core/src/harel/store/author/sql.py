"""The store-author API of the SQL family (SQLite, libSQL, rqlite): one schema, one set of
statements, one plan, and SQLite's failures mapped to the contract's errors.

A SQL-family backend picks a :class:`Dialect`, builds a :class:`SqlPlan` for its database and
drives it (or subclasses :class:`SqlStore`, which does both over one DB-API connection); it
writes no SQL of its own beyond connection settings.  ``FileHarness`` / ``FileBackend`` are its
test harness for a file database.
"""

from harel.store.common.sql import (
    DDL,
    RQLITE,
    SCHEMA_VERSION,
    SQLITE,
    UPGRADES,
    Batch,
    Dialect,
    Rendered,
    Result,
    SqlContract,
    SqlOp,
    SqlPlan,
    SqlStore,
    Statement,
    write_result,
)
from harel.store.common.sql.errors import (
    BUSY,
    LOCKED,
    RequestOutcomeUnknown,
    engine_error,
    primary_code,
)
from harel.store.common.sql.harness import FileHarness, FileKind, raw_side_statements
from harel.store.common.sql.testing import FileBackend

__all__ = [
    "BUSY",
    "DDL",
    "LOCKED",
    "RQLITE",
    "SCHEMA_VERSION",
    "SQLITE",
    "UPGRADES",
    "Batch",
    "Dialect",
    "FileBackend",
    "FileHarness",
    "FileKind",
    "Rendered",
    "RequestOutcomeUnknown",
    "Result",
    "SqlContract",
    "SqlOp",
    "SqlPlan",
    "SqlStore",
    "Statement",
    "engine_error",
    "primary_code",
    "raw_side_statements",
    "write_result",
]
