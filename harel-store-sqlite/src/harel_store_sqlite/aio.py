"""``AsyncSqliteStore``: the asyncio twin of :class:`~harel_store_sqlite.sync.SqliteStore`.

It is a :class:`~harel.store.author.ThreadedAsyncStore`: one ``SqliteStore`` owned by one
worker thread, and every contract method runs the sync method *whole* in that thread (a whole
commit — plan and every statement — is one thread hop).  Operations of one store are therefore
serialised like the sync store's, never interleave their transactions, and a cancelled call
returns only once its operation was withdrawn (not started) or finished: a cancelled ``commit``
leaves no transaction open and ``exe.version`` telling whether it was stored.

Why not aiosqlite: it hops to its thread once per statement, so a commit paid ~8 hops and ran
at about a third of the sync store's rate; and its transactions could be left open by a
cancellation between two hops.  See the README for the figures.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Self

from harel.store.author import AsyncFromUrl, BackendSpec, ThreadedAsyncStore
from harel.store.contract import Capabilities

from harel_store_sqlite._options import SqliteOptions
from harel_store_sqlite._spec import CAPABILITIES, SPEC
from harel_store_sqlite.sync import SqliteStore


class AsyncSqliteStore(AsyncFromUrl, ThreadedAsyncStore[SqliteStore]):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` in one SQLite file.

    Build it with ``await AsyncSqliteStore.open(path, **knobs)`` or
    ``await AsyncSqliteStore.from_url(url)``; the knobs are those of ``SqliteStore``.
    Safe for any number of concurrent tasks; close it with ``await store.close()`` (an
    unclosed store never keeps the interpreter from exiting).
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    @classmethod
    async def open(cls, path: str = ":memory:", **knobs: Any) -> Self:
        """Open (creating or upgrading if needed) the database at ``path`` in a new worker
        thread."""
        return await cls.start(partial(SqliteStore, path, **knobs), name=f"harel-sqlite:{path}")

    @classmethod
    async def create(cls, path: str = ":memory:", **knobs: Any) -> Self:
        """The reference implementation's name of :meth:`open`: the same arguments, the same
        store (kept so ported code runs unchanged)."""
        return await cls.open(path, **knobs)

    @property
    def options(self) -> SqliteOptions:
        """The validated settings of the wrapped store."""
        return self.store.options

    def __repr__(self) -> str:
        return f"AsyncSqliteStore({self.options.path!r})"
