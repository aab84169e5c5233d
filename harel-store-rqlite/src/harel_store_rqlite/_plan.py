"""rqlite's sans-IO plan: the SQL family's plan in rqlite's dialect, plus the open sequence.

Every operation is a generator of :class:`~harel.store.common.sql.SqlPlan` shared with SQLite
and libSQL; rqlite's dialect is data: ``?`` placeholders and no interactive transaction (a
write transaction is ONE request), so a commit is one batch whose side writes are guarded by
the ``commit_token`` its CAS wrote, and, with the unified endpoint, the lost CAS's found
version rides in the same batch.  :mod:`harel_store_rqlite._wire` turns these requests into
HTTP calls.  No driver import.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

from harel.store.common.sql import RQLITE, Dialect, SqlPlan

from harel_store_rqlite._options import RqliteOptions
from harel_store_rqlite._plugin import DISTRIBUTION
from harel_store_rqlite._wire import READY, Request

DIALECT: Dialect = RQLITE
"""``?`` placeholders, single-request transactions, reads allowed in a batch (/db/request)."""

EXECUTE_ONLY: Dialect = replace(RQLITE, name="rqlite (no unified endpoint)", batch_reads=False)
"""For servers without ``/db/request``: batches hold writes only (``/db/execute``)."""


def rqlite_plan(options: RqliteOptions) -> SqlPlan:
    """The plan of the node ``options`` names (documents up to the shared 16 MiB limit)."""
    dialect = DIALECT if options.unified else EXECUTE_ONLY
    return SqlPlan(dialect, where=options.where, distribution=DISTRIBUTION)


def open_store(plan: SqlPlan, now: float) -> Generator[Request, Any, None]:
    """Opening: ask ``/readyz`` (a node without a leader fails here with ``StoreUnavailable``,
    which ``from_url`` retries), then check / create / upgrade the schema (``now`` dates the
    marks of an upgraded database)."""
    yield READY
    yield from plan.open_schema(now)
