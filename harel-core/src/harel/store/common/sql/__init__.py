"""The SQL family (SQLite, libSQL, rqlite): one schema, one set of statements, one plan.

A SQL-family backend picks a :class:`Dialect` (how statements reach its engine: placeholder
style, interactive ``BEGIN IMMEDIATE`` transactions or single-request batches, upsert style),
builds a :class:`SqlPlan` for its database, and drives the plan's generators with a loop that
executes :class:`Statement` / :class:`Batch` requests and sends back :class:`Result` values.
It writes no SQL of its own beyond its connection settings (PRAGMAs, URLs, timeouts).
A backend with one DB-API-style connection subclasses :class:`SqlStore` (the contract methods
and the drive loop); :mod:`harel.store.common.sql.errors` maps SQLite's own failures.
"""

from harel.store.common.sql.dialect import RQLITE, SQLITE, Dialect, Rendered, render
from harel.store.common.sql.plan import SqlOp, SqlPlan
from harel.store.common.sql.requests import Batch, Result, Statement, write_result
from harel.store.common.sql.schema import DDL, SCHEMA_VERSION, UPGRADES
from harel.store.common.sql.statements import SqlStatements, statements_for
from harel.store.common.sql.store import SqlContract, SqlStore

__all__ = [
    "DDL",
    "RQLITE",
    "SCHEMA_VERSION",
    "SQLITE",
    "UPGRADES",
    "Batch",
    "Dialect",
    "Rendered",
    "Result",
    "SqlContract",
    "SqlOp",
    "SqlPlan",
    "SqlStatements",
    "SqlStore",
    "Statement",
    "render",
    "statements_for",
    "write_result",
]
