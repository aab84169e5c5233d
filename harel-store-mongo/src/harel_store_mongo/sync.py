"""``MongoStore``: the synchronous MongoDB store over PyMongo.

Every contract method is :class:`harel.store.author.PlanStore`'s, running one plan of
:class:`~harel_store_mongo._plan.MongoPlan` through :func:`harel.store.author.drive`; each
request is one call on the client's collections, so the store is as thread-safe as
``MongoClient`` (fully).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Self, TypeVar, Unpack

import pymongo
from harel.store.author import PlanStore, connect_with_retry, drive

from harel_store_mongo._base import MongoStoreBase, StoreKnobs
from harel_store_mongo._calls import issue
from harel_store_mongo._errors import translate
from harel_store_mongo._operations import Plan
from harel_store_mongo._options import MongoOptions
from harel_store_mongo._plan import MongoPlan
from harel_store_mongo._requests import Request
from harel_store_mongo._spec import SPEC

T = TypeVar("T")


class MongoStore(MongoStoreBase, PlanStore[MongoPlan]):
    """A durable, thread-safe :class:`~harel.store.contract.ExecutionStore` in MongoDB.

    Wraps a ``pymongo.MongoClient`` (or any client with its API, e.g. mongomock's); the caller
    keeps owning it unless ``owns_client=True``.  Opening reaches the server, checks the
    layout version in database ``db`` (creating or upgrading the layout).  Prefer
    :meth:`from_url`.
    """

    def __init__(self, client: Any, **knobs: Unpack[StoreKnobs]) -> None:
        """Wrap ``client`` (knobs: :class:`~harel_store_mongo._base.StoreKnobs`) and open
        the store; a failure closes a client the store owns."""
        self._open(partial(super().__init__, client, **knobs))

    def _open(self, setup: Callable[[], None]) -> None:
        """``setup()`` (it binds the client), then open; a failure closes a client the store
        owns."""
        try:
            setup()
            self._run(self._plan.open())
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, **knobs: Any) -> Self:
        """Open ``mongodb://host:27017/?db=harel`` or ``mongodb+srv://cluster/?db=harel``.

        An unreachable server is retried ``connect_retries`` times (default 5, backoff from
        ``retry_delay`` seconds) and then raises ``StoreUnavailable``.  Other knobs: see
        :data:`harel_store_mongo._spec.SPEC`.
        """
        arguments, retry = SPEC.open_args(url, knobs)
        return connect_with_retry(partial(cls._connect, MongoOptions(**arguments)), **retry)

    @classmethod
    def _connect(cls, options: MongoOptions) -> Self:
        """One attempt of :meth:`from_url`: a new client and the open (which closes it on
        failure)."""
        with translate(options.where):
            client = pymongo.MongoClient(options.driver_uri, **options.client_kwargs())
        store = cls.__new__(cls)
        store._open(partial(store._adopt, client, options))
        return store

    def _execute(self, request: Request) -> Any:
        database = self._database
        if database is None:
            raise self._closed()
        with translate(self.where):
            raw = issue(database, request)
            return list(raw) if request.cursor else raw

    def _run(self, operation: Plan[T]) -> T:
        """Drive one plan; no driver exception escapes (see :mod:`harel_store_mongo._errors`)."""
        return drive(operation, self._execute)

    def close(self) -> None:
        """Release the client if this store owns it (idempotent); later calls raise."""
        client = self._release()
        if client is not None:
            client.close()
