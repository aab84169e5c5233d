"""``LibsqlStore``: the synchronous libSQL store over the ``libsql`` driver.

One connection per store, in autocommit mode (``isolation_level=None``) so every transaction
is the plan's own ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any failure.  The drive
loop and the contract methods are the SQL family's (:class:`harel.store.common.sql.SqlStore`:
one operation at a time on the connection, under a ``threading.Lock``); this module owns only
the connection's lifecycle, and ``_driver.py`` every call into the driver.

An embedded replica pulls the primary's changes after every lost CAS, so the retry that
follows a conflict reads what beat it instead of conflicting again.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, TypeVar

from harel.store.author import BackendSpec, FromUrl
from harel.store.author.sql import Batch, Result, SqlOp, SqlStore, Statement
from harel.store.contract import Capabilities
from harel.store.errors import StoreConflict, StoreError

from harel_store_libsql._driver import execute, open_database, refresh
from harel_store_libsql._errors import closed_error
from harel_store_libsql._options import LibsqlOptions, make_options
from harel_store_libsql._spec import CAPABILITIES, SPEC

T = TypeVar("T")


class LibsqlStore(FromUrl, SqlStore[Any]):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` on libSQL.

    ``database`` is a local file (created on first open), ``":memory:"``, or a server URL
    (``libsql://host``, ``https://host``, ``http://host:8080``); with ``sync_url`` a local file
    becomes an embedded replica of that primary.  The knobs (``trace_max``, ``auth_token``,
    ``sync_url``, ``sync_interval``, ``busy_timeout_ms``, ``synchronous``) are declared in
    :data:`~harel_store_libsql._spec.SPEC` (and the README).  Opening checks the schema
    version, creates the schema in an empty database and upgrades a version-1 one in place.
    :meth:`from_url` opens ``libsql+file:///path.db`` (``?sync_url=...``: a replica) or
    ``libsql://host?auth_token=...``, retrying (``connect_retries``, ``retry_delay``) an open
    that finds the file locked or the server unreachable: by default 5 times for a server or
    replica, never for a file.
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    def __init__(self, database: str = ":memory:", **knobs: Any) -> None:
        self.options: LibsqlOptions = make_options(database, **knobs)
        self.trace_max = self.options.trace_max
        self._lock = threading.Lock()
        self._conn = None
        self._conn, self._plan = open_database(self.options)

    def __repr__(self) -> str:
        return f"LibsqlStore({self.options.where})"

    def _execute(self, conn: Any, request: Statement | Batch) -> Result:
        return execute(conn, self.options, request)

    def _closed_error(self) -> StoreError:
        return closed_error(self.options)

    def _drive(self, conn: Any, operation: SqlOp[T]) -> T:
        """Every operation's drive (the store's lock held): a lost CAS also pulls the
        primary's latest changes into an embedded replica before the conflict is raised."""
        try:
            return super()._drive(conn, operation)
        except StoreConflict:
            refresh(conn, self.options)
            raise

    def refresh(self) -> None:
        """Pull the primary's latest changes now (an embedded replica; otherwise a no-op)."""
        with self._lock:
            if self._conn is not None:
                refresh(self._conn, self.options)
