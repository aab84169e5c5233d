"""libSQL's sans-IO plan: the SQL family's plan, in SQLite's own dialect.

libSQL is SQLite's engine, so nothing in the plan is libSQL's own: the same statements
(``?`` placeholders, ``BEGIN IMMEDIATE`` transactions, ``ON CONFLICT`` upserts) run on a local
file, a replica (writes forwarded to the primary) and a server.  What differs lives in the
driver module (``_driver.py``): how values are bound (the ``libsql`` driver binds ints beyond
32 bits as floats, so they travel as text) and how lock waits and errors are handled.
No driver import.
"""

from __future__ import annotations

from harel.store.author.sql import SQLITE, Dialect, SqlPlan

from harel_store_libsql._options import LibsqlOptions
from harel_store_libsql._spec import DISTRIBUTION

DIALECT: Dialect = SQLITE
"""SQLite's dialect: libSQL speaks it unchanged."""


def libsql_plan(options: LibsqlOptions) -> SqlPlan:
    """The plan of the database ``options`` names (documents up to the shared 16 MiB limit)."""
    return SqlPlan(DIALECT, where=options.where, distribution=DISTRIBUTION)
