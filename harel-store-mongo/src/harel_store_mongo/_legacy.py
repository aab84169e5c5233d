"""The legacy variables ``STM_MONGO_URL`` / ``STM_MONGO_DB`` as a store URL (the function
:data:`~harel_store_mongo._spec.SPEC`'s ``legacy_env`` names), and :func:`with_db`."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from harel.store.errors import StoreConfigError

from harel_store_mongo._spec import LEGACY_VARS, check_db
from harel_store_mongo._uri import cut


def with_db(url: str, db: str) -> str:
    """``url`` with its ``db`` knob set to ``db`` (other parts kept as written)."""
    base, *_, pairs = cut(url)
    kept = [pair for key, pair in pairs if key != "db"]
    return f"{base}?{'&'.join([*kept, urlencode({'db': check_db(db)})])}"


def url_from_env(env: Mapping[str, str]) -> str | None:
    """``STM_MONGO_URL`` with ``STM_MONGO_DB`` as its ``db`` (replacing the URL's); ``None``
    when neither is set; ``STM_MONGO_DB`` alone or unusable raises :class:`StoreConfigError`."""
    url, db = ((env.get(name) or "").strip() or None for name in LEGACY_VARS)
    if url is None and db is not None:
        raise StoreConfigError(
            "STM_MONGO_DB is set but STM_MONGO_URL is not: set STM_MONGO_URL="
            "mongodb://host:27017 (or STM_STORE_URL=mongodb://host:27017/?db=...)"
        )
    try:
        return url if url is None or db is None else with_db(url, db)
    except ValueError as exc:
        raise StoreConfigError(f"STM_MONGO_DB: {exc}") from None
