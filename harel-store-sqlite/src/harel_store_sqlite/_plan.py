"""SQLite's sans-IO plan: the SQL family's plan in SQLite's dialect.

Every operation with more than one statement or a decision between statements (open with its
schema check/creation/upgrade, commit with its CAS → conflict → side writes, append_trace's
guard, purge's refusal of an active execution, prune's batches) is a generator of
:class:`~harel.store.common.sql.SqlPlan`, shared with libSQL and rqlite; the SQLite dialect
(``?`` placeholders, ``BEGIN IMMEDIATE`` transactions, ``ON CONFLICT`` upserts) is data.
``sync.py`` drives these generators with :func:`harel.store.author.drive`.  No driver import.
"""

from __future__ import annotations

from harel.store.author.sql import SQLITE, Dialect, SqlPlan

from harel_store_sqlite._options import SqliteOptions
from harel_store_sqlite._spec import DISTRIBUTION

DIALECT: Dialect = SQLITE
"""``?`` placeholders, ``BEGIN IMMEDIATE`` (the write lock before the first read, so lock
waits happen before any work), ``ON CONFLICT`` upserts (SQLite >= 3.24)."""


def sqlite_plan(options: SqliteOptions) -> SqlPlan:
    """The plan of the database ``options`` names (documents up to the shared 16 MiB limit)."""
    return SqlPlan(DIALECT, where=options.where, distribution=DISTRIBUTION)
