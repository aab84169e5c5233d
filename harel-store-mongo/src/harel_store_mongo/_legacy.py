"""The upstream worker's environment variables for MongoDB (read only when ``STM_STORE_URL`` is
not set).  Imports no driver."""

from __future__ import annotations

from collections.abc import Mapping

from harel.store.errors import StoreConfigError

URL_VARIABLE = "STM_MONGO_URL"
DB_VARIABLE = "STM_MONGO_DB"
VARIABLES = (URL_VARIABLE, DB_VARIABLE)


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value is not None and value.strip() else None


def url_from_env(env: Mapping[str, str]) -> str | None:
    """``STM_MONGO_URL`` with ``STM_MONGO_DB`` as its ``db`` knob; ``None`` when neither is set.

    ``STM_MONGO_DB`` without ``STM_MONGO_URL`` raises ``StoreConfigError``.
    """
    url = _get(env, URL_VARIABLE)
    db = _get(env, DB_VARIABLE)
    if url is None:
        if db is not None:
            raise StoreConfigError(
                f"{DB_VARIABLE} is set but {URL_VARIABLE} is not: set "
                f"{URL_VARIABLE}=mongodb://host:27017 (or STM_STORE_URL=mongodb://host:27017/?db=...)"
            )
        return None
    if db is None:
        return url
    from harel_store_mongo._options import with_db  # no driver import either

    try:
        return with_db(url, db)
    except ValueError as exc:
        raise StoreConfigError(f"{DB_VARIABLE}: {exc}") from None
