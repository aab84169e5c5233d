"""``store_exists(url)``: whether a libSQL store exists at ``url`` (creates nothing).

The spec declares it as its ``exists`` hook; harel-core's registry calls it for
``open_store(url, create=False)`` (the CLI's read-only commands).  A local file that is
missing is not opened (the driver would create it); an existing file, a server, or a replica's
primary is asked for the ``harel_schema`` / ``executions`` tables, one read.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from harel.store.author import connect_with_retry, drive

from harel_store_libsql._driver import connect, execute
from harel_store_libsql._options import LibsqlOptions, make_options
from harel_store_libsql._plan import libsql_plan
from harel_store_libsql._spec import SPEC


def store_exists(url: str, **knobs: Any) -> bool:
    """Whether ``url`` names a libSQL database holding a harel store (``:memory:`` always
    does).  A replica asks its primary, leaving the local file as it is.  Errors:
    InvalidStoreURL, StoreUnavailable (server unreachable, after the retries)."""
    arguments, retry = SPEC.open_args(url, knobs)
    options = make_options(**arguments)
    if options.mode == "file":
        if options.in_memory:
            return True
        if not Path(options.database).is_file():
            return False
    elif options.mode == "replica" and options.sync_url is not None:
        options = make_options(options.sync_url, auth_token=options.auth_token)
    return connect_with_retry(partial(_probe, options), **retry)


def _probe(options: LibsqlOptions) -> bool:
    conn = connect(options)
    try:
        return drive(libsql_plan(options).holds_store(), partial(execute, conn, options))
    finally:
        conn.close()
