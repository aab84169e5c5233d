"""Whether a store URL names existing storage, without creating any (``create=False``).

A backend answers through a ``store_exists(url) -> bool`` classmethod of its sync store class
(the hook); the first-party backends without one have a rule here (memory: the named dataset
of this process; SQLite: the database file; PostgreSQL: the schema's ``executions`` table).
``None`` means the backend cannot tell: the caller opens it as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harel.registry._descriptor import StoreBackend
from harel.registry._select import import_object, store_class


def _memory(url: str) -> bool:
    from harel.store.memory import _options

    name = _options.dataset_name(url)
    return bool(name) and name in _options._NAMED


def _sqlite(url: str) -> bool:
    parse: Callable[[str], tuple[str, dict[str, Any]]] = import_object(
        "harel_store_sqlite._options:parse_sqlite_url"
    )
    path, _ = parse(url)
    return path == ":memory:" or Path(path).is_file()


def _postgres(url: str) -> bool:
    probe: Callable[[str], bool] = import_object("harel_store_postgres._exists:store_exists")
    return probe(url)


RULES: dict[str, Callable[[str], bool]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}
"""Existence rules of first-party backends whose store class has no ``store_exists`` hook."""


def store_exists(backend: StoreBackend, url: str) -> bool | None:
    """Whether ``url`` names existing storage of ``backend`` (``None``: it cannot tell).

    Creates nothing.  Errors are the backend's typed ones (InvalidStoreURL, StoreUnavailable).
    """
    hook = getattr(store_class(backend), "store_exists", None)
    if callable(hook):
        return bool(hook(url))
    rule = RULES.get(backend.name)
    if rule is not None and backend.distribution in _FIRST_PARTY_DISTRIBUTIONS:
        return rule(url)
    return None


_FIRST_PARTY_DISTRIBUTIONS = frozenset({"harel-core", "harel-store-sqlite", "harel-store-postgres"})
