"""``store_exists(url)``: whether an rqlite store exists at ``url`` (creates nothing).

The plugin declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands).  One read through the query
endpoint (``POST /db/query``, at the ``level`` knob) of which marker tables exist: no
readiness check, no schema check, no write.
"""

from __future__ import annotations

from typing import Any

from harel.store.author import connect_with_retry

from harel_store_rqlite._options import RqliteOptions, open_options
from harel_store_rqlite.sync import RqliteStore


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether the database of the node ``url`` names holds a harel store (its
    ``harel_schema`` or ``executions`` table).  Errors: InvalidStoreURL, StoreUnavailable
    (node unreachable or without a leader, after the retries)."""
    options, retry = open_options(url, knobs)
    return connect_with_retry(lambda: _probe(options), **retry)


def _probe(options: RqliteOptions) -> bool:
    with RqliteStore._unopened(options) as store:
        return store._run(store._plan.holds_store())
