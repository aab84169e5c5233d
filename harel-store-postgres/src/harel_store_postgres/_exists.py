"""``store_exists(url)``: whether a PostgreSQL store exists at ``url`` (creates nothing).

The store exists when its schema holds the ``executions`` table; harel-core's registry calls
this for ``open_store(url, create=False)`` (the CLI's read-only commands).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from harel.store.author import connect_with_retry

from harel_store_postgres._errors import DRIVER_ERRORS, map_error
from harel_store_postgres._options import make_options

_QUERY = "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s"


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether ``url``'s schema holds a harel store (its ``executions`` table); one
    connection, read only.  Errors: InvalidStoreURL, StoreUnavailable (after the retries)."""
    from harel_store_postgres.sync import _connect

    options = make_options(url, **knobs)
    conn = connect_with_retry(partial(_connect, options), **options.retry_arguments())
    with conn:
        try:
            row = conn.execute(_QUERY, (options.schema, "executions")).fetchone()
        except DRIVER_ERRORS as exc:
            raise map_error(exc, options.where) from exc
    return row is not None
