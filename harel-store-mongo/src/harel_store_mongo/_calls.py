"""How a plan's :class:`~harel_store_mongo._requests.Request` becomes a driver call; shared by
the sync and the async driver (PyMongo, PyMongo async, motor and the mongomock test doubles
all have the same collection methods; only awaiting and cursor draining differ)."""

from __future__ import annotations

from typing import Any

from pymongo import IndexModel, UpdateOne

from harel_store_mongo._requests import Request
from harel_store_mongo._schema import IndexSpec


def index_models(specs: tuple[IndexSpec, ...]) -> list[IndexModel]:
    """The driver's description of the store's indexes."""
    models = []
    for spec in specs:
        options: dict[str, Any] = {"name": spec.name}
        if spec.partial is not None:
            options["partialFilterExpression"] = spec.partial
        models.append(IndexModel(list(spec.keys), **options))
    return models


def issue(database: Any, request: Request) -> Any:
    """Start the call ``request`` names on ``database`` (or one of its collections).

    Returns what the driver returns: the result itself (sync), an awaitable (async), or a
    cursor (``request.cursor``) for the caller to drain.
    """
    target = database if not request.collection else database.get_collection(request.collection)
    args = request.args
    if request.method == "create_indexes":
        args = (index_models(args[0]),)
    elif request.method == "bulk_write":  # (filter, update) pairs: upserting UpdateOnes
        args = ([UpdateOne(query, update, upsert=True) for query, update in args[0]],)
    return getattr(target, request.method)(*args, **request.kwargs)
