"""One MongoDB store's validated settings: :class:`MongoOptions`, built by :func:`make_options`
from a URL and the knobs :data:`~harel_store_mongo._spec.SPEC` declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harel.store.author import redact_url

from harel_store_mongo._spec import SPEC


@dataclass(frozen=True, slots=True)
class MongoOptions:
    """Validated settings of a store opened from a URL: ``driver_uri`` is the URL without
    harel's knobs (credentials kept; ``repr`` and :attr:`where` never show a secret),
    ``driver_options`` the lower-case names of the driver options it sets."""

    driver_uri: str = field(repr=False)
    driver_options: frozenset[str]
    db: str
    w: str | None
    trace_max: int | None

    @property
    def where(self) -> str:
        """Where the data lives, for messages: the servers and the database (no secrets)."""
        return f"MongoDB {redact_url(self.driver_uri)} (database {self.db!r})"

    def store_kwargs(self) -> dict[str, Any]:
        """The store constructors' keywords besides the client (the store owns it)."""
        knobs = {"db": self.db, "trace_max": self.trace_max, "w": self.w, "where": self.where}
        return {**knobs, "owns_client": True}

    def client_kwargs(self) -> dict[str, Any]:
        """``MongoClient`` / ``AsyncMongoClient`` keywords besides the URI: a 5 s server
        selection (PyMongo's: 30 s) and ``appname=harel``, unless the URL sets them."""
        defaults = {"serverSelectionTimeoutMS": 5000, "appname": "harel"}
        return {k: v for k, v in defaults.items() if k.lower() not in self.driver_options}


def make_options(url: str, **knobs: Any) -> MongoOptions:
    """The settings ``url`` and ``knobs`` name (keywords win), checked against :data:`SPEC`
    (``InvalidStoreURL`` / ``InvalidStoreOption``, no secret shown)."""
    return MongoOptions(**SPEC.open_args(url, knobs).arguments)
