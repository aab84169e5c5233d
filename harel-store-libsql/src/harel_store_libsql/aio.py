"""``AsyncLibsqlStore``: the asyncio twin of :class:`~harel_store_libsql.sync.LibsqlStore`.

The ``libsql`` driver is synchronous only.  This store is a
:class:`~harel.store.author.ThreadedAsyncStore`: one ``LibsqlStore`` owned by one worker
thread, every contract method running the sync method *whole* in that thread (a whole commit —
plan and every statement — is one thread hop).  Operations of one store are serialised in
submission order and never share the connection between overlapping transactions; a
cancelled call returns only once its operation was withdrawn (not started) or finished, so a
cancelled ``commit`` leaves no transaction open and ``exe.version`` telling whether it was
stored.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Self

from harel.store.author import AsyncFromUrl, BackendSpec, ThreadedAsyncStore
from harel.store.contract import Capabilities

from harel_store_libsql._options import LibsqlOptions
from harel_store_libsql._spec import CAPABILITIES, SPEC
from harel_store_libsql.sync import LibsqlStore


class AsyncLibsqlStore(AsyncFromUrl, ThreadedAsyncStore[LibsqlStore]):
    """A durable :class:`~harel.store.contract.AsyncExecutionStore` on libSQL.

    Build it with ``await AsyncLibsqlStore.open(database, **knobs)`` or
    ``await AsyncLibsqlStore.from_url(url)`` (retries as for :meth:`LibsqlStore.from_url`);
    arguments as for ``LibsqlStore``.  Safe for any number of concurrent tasks; close it with
    ``await store.close()`` (an unclosed store never keeps the interpreter from exiting).
    """

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    spec: ClassVar[BackendSpec] = SPEC

    @classmethod
    async def open(cls, database: str = ":memory:", **knobs: Any) -> Self:
        """Open (creating or upgrading if needed) ``database`` in a new worker thread."""
        return await cls.start(partial(LibsqlStore, database, **knobs), name="harel-libsql")

    @classmethod
    async def create(cls, database: str = ":memory:", **knobs: Any) -> Self:
        """The reference implementation's name of :meth:`open`: the same arguments, the same
        store (kept so ported code runs unchanged)."""
        return await cls.open(database, **knobs)

    @property
    def options(self) -> LibsqlOptions:
        """The validated settings of the wrapped store (the token hidden in its ``repr``)."""
        return self.store.options

    async def refresh(self) -> None:
        """Pull the primary's latest changes now (an embedded replica; otherwise a no-op)."""
        await self._run(self.store.refresh)

    def __repr__(self) -> str:
        return f"AsyncLibsqlStore({self.options.where})"
